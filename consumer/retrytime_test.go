package consumer_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A failed attempt is recorded with its retry time, then put back with that delay. A
// worker that dies between the two leaves the job to come back after AckWait, which
// may be sooner: the redelivery then waits for the rest of the backoff instead of
// running early, and the wait is not counted as an attempt.
func TestEarlyRedeliveryWaitsForRetryTime(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "retrytime"
	p := newProducer(t, js, q)
	runs := &runLog{}
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		runs.add(j.ID(), j.Attempt())
		return nil
	}), consumer.AckWait(500*time.Millisecond))
	ctx := testenv.Context(t, 10*time.Second)
	info, err := p.Enqueue(ctx, []byte("x"), producer.ID("job"))
	if err != nil {
		t.Fatal(err)
	}
	// A worker takes the job, runs it, fails, records the retry time and dies.
	_, enqueue := takeDelivery(t, js, q)
	retryAt := time.Now().Add(3 * time.Second)
	writeRecord(t, js, q, "job", map[string]any{
		"id": "job", "queue": q, "state": "retrying", "attempt": 1, "enqueue": enqueue, "run": "gone-1",
		"sequence": info.Sequence, "last_error": "boom", "retry_at": retryAt,
		"worker": map[string]any{"name": "gone", "host": "h", "pid": 1},
	})
	runWorker(t, w)
	testenv.Eventually(t, 10*time.Second, "job done", func() bool { return status(t, p, "job").State == producer.StateDone })
	if got := runs.runs("job"); !slices.Equal(got, []int{2}) {
		t.Fatalf("ran attempts %v, want [2]", got)
	}
	if start := runs.startTimes("job")[0]; start.Before(retryAt.Add(-100 * time.Millisecond)) {
		t.Fatalf("attempt 2 started %s before its retry time", retryAt.Sub(start).Round(time.Millisecond))
	}
	if w.Stats().Early == 0 {
		t.Fatal("no delivery was put back for being early")
	}
}
