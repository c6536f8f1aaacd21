package consumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A job id whose record is finished (done here) runs again when a new enqueue of that
// id arrives — as when a dead letter is requeued or an id is enqueued again after the
// duplicate window: a message of another enqueue (here a client that sets no
// Workq-Enqueue) claims over the old record, as attempt 1.
func TestIDReusedAfterFinishedRecord(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "reuse"
	p := newProducer(t, js, q)
	runs := make(chan uint64, 4)
	release := make(chan struct{})
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		select { // held until the test has seen the claim
		case <-release:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		token, _ := j.FencingToken(ctx)
		runs <- token
		return j.Fence(ctx)
	}), consumer.AckWait(30*time.Second))
	runWorker(t, w)
	// letRun waits for the run in progress to have written its claim over
	// whatever the record said before, then lets the handler go on.
	letRun := func() {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, "the record to show the job running", func() bool {
			return status(t, p, "again").State == producer.StateRunning
		})
		select {
		case release <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatal("the handler is not running")
		}
	}

	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("1"), producer.ID("again")); err != nil {
		t.Fatal(err)
	}
	letRun()
	testenv.Eventually(t, 10*time.Second, "first run done", func() bool { return status(t, p, "again").State == producer.StateDone })
	first := <-runs

	// A new message for the same job id, under a message id the dedup window
	// has not seen (what a requeue publishes).
	msg := &nats.Msg{Subject: "workq." + q + ".jobs.again", Data: []byte("2"), Header: nats.Header{}}
	msg.Header.Set("Nats-Msg-Id", "again:requeue:1")
	if _, err := js.PublishMsg(testenv.Context(t, 5*time.Second), msg); err != nil {
		t.Fatal(err)
	}
	letRun()
	var second uint64
	select {
	case second = <-runs:
	case <-time.After(10 * time.Second):
		t.Fatal("the reused id did not run again")
	}
	if second == 0 || second <= first {
		t.Fatalf("second run's token %d, first %d", second, first)
	}
	testenv.Eventually(t, 10*time.Second, "second commit", func() bool { return w.Stats().Committed == 2 })
	if s := w.Stats(); s.Reassigned != 0 {
		t.Fatalf("reuse counted as reassignment: %+v", s)
	}
}
