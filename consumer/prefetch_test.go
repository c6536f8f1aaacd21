package consumer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/testenv"
)

// A worker starting on long jobs takes only what it can run: while the handlers' pace
// is unknown its buffer holds nothing beyond its idle slots, so a worker started a
// moment later gets the rest and the jobs run side by side.
func TestStartingWorkerTakesOnlyWhatItCanRun(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "shallow"
	p := newProducer(t, js, q)
	enqueueN(t, p, 4, "long")
	ranA, ranB := &runLog{}, &runLog{}
	long := func(r *runLog) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
			r.add(j.ID(), j.Attempt())
			select {
			case <-time.After(1500 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		})
	}
	wA := newWorker(t, js, q, long(ranA), consumer.Concurrency(2), consumer.Name("A"))
	runWorker(t, wA)
	testenv.Eventually(t, 5*time.Second, "A running 2 jobs", func() bool { return wA.Stats().Started == 2 })
	wB := newWorker(t, js, q, long(ranB), consumer.Concurrency(2), consumer.Name("B"))
	runWorker(t, wB)
	testenv.Eventually(t, 10*time.Second, "every job done", func() bool {
		return wA.Stats().Committed+wB.Stats().Committed == 4
	})
	if a, b := wA.Stats().Started, wB.Stats().Started; a != 2 || b != 2 {
		t.Fatalf("A ran %d jobs and B %d; want 2 each (A must not hold jobs it cannot run)", a, b)
	}
}

// Prefetch(0) holds no job beyond the running ones, also once the handlers' pace is
// known to be fast (when the adaptive buffer would be deep).
func TestPrefetchZeroHoldsOnlyRunningJobs(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "prefetch0"
	p := newProducer(t, js, q)
	release := make(chan struct{})
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if strings.HasPrefix(j.ID(), "fast") {
			return nil
		}
		<-release
		return nil
	}), consumer.Concurrency(3), consumer.Prefetch(0))
	runWorker(t, w)
	defer close(release)
	enqueueN(t, p, 50, "fast")
	testenv.Eventually(t, 10*time.Second, "the fast jobs done", func() bool { return w.Stats().Committed == 50 })
	enqueueN(t, p, 10, "j")
	ctx := testenv.Context(t, 10*time.Second)
	c, err := js.Consumer(ctx, "WORKQ_"+q, "workers")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "3 blocking jobs running", func() bool { return w.Stats().Started == 53 })
	// The worker has pulled what it will pull: wait for a pull expiry to pass, then
	// count what it holds.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending != 3 {
			t.Fatalf("worker holds %d jobs with 3 running and Prefetch(0); want 3", info.NumAckPending)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
