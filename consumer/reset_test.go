package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A consumer reset makes the server forget its deliveries and send a job that worker
// A is running out again as a first delivery, to worker B — as a crashed single
// server does with its last deliveries. B finds A's live claim in the record and
// leaves the job to A (putting its copy back) instead of running it beside A;
// once A commits, B's copy is acked without running. The handler runs once. Finding 1
// of issue 24: B used to run a provably "current" first delivery on a lazy claim.
func TestResetConsumerDoesNotRunAHeldJobTwice(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	const q = "reset"
	p := newProducer(t, env.JetStream(t), q)
	var runs atomic.Int64
	started := make(chan string, 2)
	release := make(chan struct{})
	h := func(name string) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
			runs.Add(1)
			started <- name
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
	}
	opts := []consumer.Option{consumer.AckWait(2 * time.Second), consumer.Concurrency(1), consumer.Prefetch(0)}
	wA := newWorker(t, env.JetStream(t), q, h("A"), append(opts, consumer.Name("A"))...)
	runWorker(t, wA)
	ctx := testenv.Context(t, 30*time.Second)
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("held")); err != nil {
		t.Fatal(err)
	}
	if who := <-started; who != "A" {
		t.Fatalf("first run on %s", who)
	}
	// A's only slot is busy and it pulls nothing more (Prefetch 0): the job's next
	// delivery goes to B.
	wB := newWorker(t, env.JetStream(t), q, h("B"), append(opts, consumer.Name("B"))...)
	runWorker(t, wB)
	js := env.JetStream(t)
	if _, err := js.ResetConsumer(ctx, "WORKQ_"+q, "workers"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "B to find the job held", func() bool { return wB.Stats().Watched > 0 })
	// Longer than the lease: A's renewals keep it alive.
	time.Sleep(3 * time.Second)
	select {
	case who := <-started:
		t.Fatalf("a second run started on %s while A held the job", who)
	default:
	}
	close(release)
	testenv.Eventually(t, 10*time.Second, "the job done", func() bool { return status(t, p, "held").State == producer.StateDone })
	testenv.Eventually(t, 10*time.Second, "the stream empty", func() bool { return pendingMessages(t, js, q) == 0 })
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
	if r := status(t, p, "held"); r.Worker.Name != "A" || r.Attempt != 1 {
		t.Fatalf("record %+v: want A's attempt 1", r)
	}
	if s := wA.Stats(); s.Committed != 1 || s.Reassigned != 0 {
		t.Fatalf("A %+v: want its commit", s)
	}
}
