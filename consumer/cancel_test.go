package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A running job that is cancelled: its handler's context ends with ErrCancelled
// within a heartbeat or so, nothing is committed, it is not retried, its record stays
// cancelled and its message leaves the queue — fenced and unfenced alike.
func TestCancelRunningJob(t *testing.T) {
	t.Parallel()
	for _, unfenced := range []bool{false, true} {
		name := "fenced"
		opts := []consumer.Option{consumer.AckWait(3 * time.Second)} // heartbeat 1 s
		if unfenced {
			name = "unfenced"
			opts = append(opts, consumer.Unfenced())
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t)
			js := env.JetStream(t)
			q := "cancel-running-" + name
			p := newProducer(t, js, q)
			var runs atomic.Int32
			started := make(chan struct{}, 4)
			causes := make(chan error, 4)
			w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
				runs.Add(1)
				started <- struct{}{}
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return ctx.Err()
			}), opts...)
			runWorker(t, w)
			ctx := testenv.Context(t, 30*time.Second)
			if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("long")); err != nil {
				t.Fatal(err)
			}
			<-started
			time.Sleep(100 * time.Millisecond) // past the lazy claim
			at := time.Now()
			rec, err := p.Cancel(ctx, "long")
			// An unfenced run writes no claim: its record shows the job as it was queued.
			if err != nil || rec.State != producer.StateCancelled || !unfenced && rec.Attempt != 1 {
				t.Fatalf("Cancel = %+v, %v", rec, err)
			}
			var cause error
			select {
			case cause = <-causes:
			case <-time.After(5 * time.Second):
				t.Fatal("the handler's context did not end within 5 s of the cancel")
			}
			took := time.Since(at)
			if !errors.Is(cause, consumer.ErrCancelled) || !errors.Is(cause, consumer.ErrStale) {
				t.Errorf("cause %v; want ErrCancelled (and ErrStale)", cause)
			}
			if took > 2*time.Second {
				t.Errorf("the handler ended %s after the cancel; want within a heartbeat (1 s) and its read", took)
			}
			testenv.Eventually(t, 10*time.Second, "the worker counts the cancel", func() bool { return w.Stats().Cancelled == 1 })
			time.Sleep(4 * time.Second) // past AckWait: a job that was not dropped would come back
			s := w.Stats()
			if runs.Load() != 1 || s.Committed != 0 || s.Retried != 0 || s.Reassigned != 0 || s.Dead != 0 {
				t.Errorf("%d runs, stats %+v: want one run, cancelled, nothing else", runs.Load(), s)
			}
			if r := status(t, p, "long"); r.State != producer.StateCancelled {
				t.Errorf("record %+v; want cancelled", r)
			}
			if n := qaStreamMsgs(t, js, "WORKQ_"+q); n != 0 {
				t.Errorf("%d messages left in the queue", n)
			}
			t.Logf("handler cancelled %s after the cancel", took.Round(time.Millisecond))
		})
	}
}

// A queued job that is cancelled never runs: neither when no worker had it (its
// message is removed) nor when it waited in a worker's buffer or stayed in the queue
// (the worker, claiming before it runs, finds the record and drops it). A retrying job that is cancelled does not run again, and a finished job cannot
// be cancelled.
func TestCancelWaitingJobsNeverRun(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "cancel-waiting"
	p := newProducer(t, js, q)
	ctx := testenv.Context(t, 60*time.Second)

	var mu sync.Mutex
	runs := map[string]int{}
	release := make(chan struct{})
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		mu.Lock()
		runs[j.ID()]++
		n := runs[j.ID()]
		mu.Unlock()
		switch {
		case j.ID() == "blocker":
			<-release
		case j.ID() == "flaky" && n == 1:
			return consumer.RetryAfter(2*time.Second, errors.New("try later"))
		}
		return nil
	}), consumer.Concurrency(1), consumer.AckWait(5*time.Second))

	// Cancelled before any worker runs: its message goes.
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("early")); err != nil {
		t.Fatal(err)
	}
	if rec, err := p.Cancel(ctx, "early"); err != nil || rec.State != producer.StateCancelled || rec.Attempt != 0 {
		t.Fatalf("Cancel(early) = %+v, %v", rec, err)
	}
	if n := qaStreamMsgs(t, js, "WORKQ_"+q); n != 0 {
		t.Fatalf("%d messages in the queue after cancelling its only job", n)
	}

	// Cancelled with its message left in the queue, as when the cancel cannot remove
	// it: the worker that gets it finds the record and drops it.
	kept, err := p.Enqueue(ctx, []byte("x"), producer.ID("kept"))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "kept", fmt.Appendf(nil, `{"id":"kept","queue":%q,"state":"cancelled","attempt":0,"sequence":%d}`, q, kept.Sequence)); err != nil {
		t.Fatal(err)
	}

	// Cancelled while in the worker's buffer behind a running job.
	runWorker(t, w)
	testenv.Eventually(t, 10*time.Second, "the worker drops the kept job", func() bool { return w.Stats().Cancelled == 1 })
	for _, id := range []string{"blocker", "buffered"} {
		if _, err := p.Enqueue(ctx, []byte("x"), producer.ID(id)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the blocker running", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return runs["blocker"] == 1
	})
	if _, err := p.Cancel(ctx, "buffered"); err != nil {
		t.Fatal(err)
	}
	close(release)

	// Cancelled while it waits out its retry backoff.
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("flaky")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "flaky retrying", func() bool { return status(t, p, "flaky").State == producer.StateRetrying })
	if rec, err := p.Cancel(ctx, "flaky"); err != nil || rec.State != producer.StateCancelled || rec.Attempt != 1 {
		t.Fatalf("Cancel(flaky) = %+v, %v", rec, err)
	}

	testenv.Eventually(t, 10*time.Second, "the blocker done", func() bool { return status(t, p, "blocker").State == producer.StateDone })
	if _, err := p.Cancel(ctx, "blocker"); !errors.Is(err, producer.ErrFinished) {
		t.Errorf("Cancel of a done job: %v; want ErrFinished", err)
	}
	time.Sleep(3 * time.Second) // past flaky's retry time
	testenv.Eventually(t, 10*time.Second, "the queue empty", func() bool { return qaStreamMsgs(t, js, "WORKQ_"+q) == 0 })
	mu.Lock()
	defer mu.Unlock()
	if runs["early"] != 0 || runs["kept"] != 0 || runs["buffered"] != 0 || runs["flaky"] != 1 {
		t.Errorf("runs %v: want early, kept and buffered never, flaky once", runs)
	}
	for _, id := range []string{"early", "kept", "buffered", "flaky"} {
		if r := status(t, p, id); r.State != producer.StateCancelled {
			t.Errorf("%s: record %s, want cancelled", id, r.State)
		}
	}
}
