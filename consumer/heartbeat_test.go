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

// waitOrCancel waits d, or until ctx ends; it returns ctx's cause if it ended first.
func waitOrCancel(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// The shortest heartbeat beats many times while a job runs, on both paths, without
// a data race between the heartbeat timer and its rescheduling (run with -race).
func TestShortHeartbeat(t *testing.T) {
	t.Parallel()
	for _, unfenced := range []bool{false, true} {
		name := "fenced"
		opts := []consumer.Option{consumer.AckWait(time.Second), consumer.Heartbeat(10 * time.Millisecond)}
		if unfenced {
			name = "unfenced"
			opts = append(opts, consumer.Unfenced())
		}
		t.Run(name, func(t *testing.T) {
			env := testenv.Start(t)
			js := env.JetStream(t)
			const q = "beat"
			p := newProducer(t, js, q)
			var runs atomic.Int32
			w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
				runs.Add(1)
				return waitOrCancel(ctx, 300*time.Millisecond)
			}), append(opts, consumer.Concurrency(4))...)
			runWorker(t, w)
			ids := enqueueN(t, p, 4, "hb")
			testenv.Eventually(t, 20*time.Second, "all jobs committed", func() bool { return w.Stats().Committed == uint64(len(ids)) })
			testenv.Eventually(t, 5*time.Second, "work queue empty", func() bool { return qaStreamMsgs(t, js, "WORKQ_"+q) == 0 })
			s := w.Stats()
			if s.Heartbeats < uint64(len(ids)) || s.Redelivered != 0 || s.Reassigned != 0 || s.Retried != 0 || runs.Load() != int32(len(ids)) {
				t.Fatalf("%d runs, stats %+v: want one run per job, each with heartbeats, nothing redelivered", runs.Load(), s)
			}
			if !unfenced {
				for _, id := range ids {
					if r := status(t, p, id); r.State != producer.StateDone || r.Attempt != 1 {
						t.Errorf("job %s: %+v", id, r)
					}
				}
			}
		})
	}
}

// A slow but live worker keeps its job: heartbeats carry a handler that runs three
// times AckWait, so JetStream never hands the job to anyone else.
func TestSlowLiveWorkerKeepsItsJob(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "slow"
	p := newProducer(t, js, q)
	var runs atomic.Int32
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		runs.Add(1)
		return waitOrCancel(ctx, 3*time.Second)
	}), consumer.AckWait(time.Second), consumer.Concurrency(2))
	runWorker(t, w)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("slow"), producer.ID("slow-1")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the job to commit", func() bool { return status(t, p, "slow-1").State == producer.StateDone })
	testenv.Eventually(t, 5*time.Second, "work queue empty", func() bool { return qaStreamMsgs(t, js, "WORKQ_"+q) == 0 })
	r := status(t, p, "slow-1")
	if r.Attempt != 1 || r.FinishedAt.Sub(r.StartedAt) < 3*time.Second {
		t.Fatalf("record %+v: want attempt 1, running 3s", r)
	}
	s := w.Stats()
	if n := runs.Load(); n != 1 || s.Started != 1 || s.Committed != 1 || s.Redelivered != 0 || s.Heartbeats == 0 {
		t.Fatalf("%d runs, stats %+v: want one run, committed, never redelivered, with heartbeats", n, s)
	}
}

// Jobs waiting in a busy worker's pull buffer longer than AckWait are not redelivered:
// the buffer reports progress on them like on running jobs. One handler slot, three
// jobs pulled at once, each running longer than AckWait: the last waits two of them.
func TestBufferedJobsKeptAlive(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "buffered"
	p := newProducer(t, js, q)
	ids := enqueueN(t, p, 3, "b")
	var runs atomic.Int32
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		runs.Add(1)
		return waitOrCancel(ctx, 700*time.Millisecond)
	}), consumer.AckWait(500*time.Millisecond), consumer.Concurrency(1), consumer.Prefetch(3))
	runWorker(t, w)
	testenv.Eventually(t, 20*time.Second, "all three jobs committed", func() bool { return w.Stats().Committed == 3 })
	for _, id := range ids {
		if r := status(t, p, id); r.State != producer.StateDone || r.Attempt != 1 {
			t.Fatalf("record %+v: want done on its first attempt", r)
		}
	}
	if s := w.Stats(); runs.Load() != 3 || s.Redelivered != 0 {
		t.Fatalf("%d runs, stats %+v: want 3 runs and no redelivery", runs.Load(), s)
	}
}
