package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Two copies of one firing of a delayed job — what the server stores when a new
// stream leader fires again what the old one fired as it failed — run once: the
// second is dropped as already done, before or after the first ended. A job
// enqueued again under the id without a due time runs again, as any job does.
func TestSecondCopyOfAFiringNeverRuns(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "copies")
	st := newStarted()
	w := newWorker(t, js, "copies", st.handler())
	ctx := testenv.Context(t, 30*time.Second)
	due := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	fired := func() *nats.Msg { return firedCopy("copies", due) }
	// Both copies stored before any worker runs: they run side by side or one after
	// the other; a third arrives after both ended.
	for range 2 {
		if _, err := js.PublishMsg(ctx, fired()); err != nil {
			t.Fatal(err)
		}
	}
	runWorker(t, w)
	testenv.Eventually(t, 10*time.Second, "both copies settled", func() bool { return qaStreamMsgs(t, js, "WORKQ_copies") == 0 })
	if _, err := js.PublishMsg(ctx, fired()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the third copy settled", func() bool { return qaStreamMsgs(t, js, "WORKQ_copies") == 0 })
	if n := len(st.runs("remind")); n != 1 {
		t.Fatalf("the firing ran %d times, want 1 (stats %+v)", n, w.Stats())
	}
	if s := w.Stats(); s.AlreadyDone != 2 {
		t.Errorf("stats %+v: want 2 copies dropped as already done", s)
	}
	r := status(t, p, "remind")
	if r.State != producer.StateDone || r.ScheduledAt.Format(time.RFC3339Nano) != due {
		t.Fatalf("record %+v", r)
	}
	// The same id enqueued again to run at once (another enqueue: here a client that
	// sets none) is a new job.
	if _, err := js.Publish(ctx, "workq.copies.jobs.remind", []byte("again")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the new job run", func() bool { return len(st.runs("remind")) == 2 })
}

// A second copy of a firing that comes while the first copy runs is put back while
// the first runs (it finds the first's live claim) for a second at a time, not for
// the rest of the lease (30 s here), and ends without running soon after the first
// commits.
func TestSecondCopyOfARunningFiringDroppedAtOnce(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	newProducer(t, js, "copies2")
	var runs atomic.Int32
	release := make(chan struct{})
	w := newWorker(t, js, "copies2", consumer.HandlerFunc(func(ctx context.Context, _ *consumer.Job) error {
		runs.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}), consumer.AckWait(30*time.Second))
	ctx := testenv.Context(t, 30*time.Second)
	due := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	fired := func() *nats.Msg { return firedCopy("copies2", due) }
	if _, err := js.PublishMsg(ctx, fired()); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	testenv.Eventually(t, 10*time.Second, "the first copy running", func() bool { return runs.Load() == 1 })
	if _, err := js.PublishMsg(ctx, fired()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the second copy watched while the first runs", func() bool {
		return w.Stats().Watched > 0
	})
	close(release)
	// Both end soon after the first commits: the copy put back is read again within a
	// second (watchPoll), not when the holder's lease would have run out.
	testenv.Eventually(t, 5*time.Second, "both copies ended", func() bool { return qaStreamMsgs(t, js, "WORKQ_copies2") == 0 })
	if n := runs.Load(); n != 1 {
		t.Fatalf("the firing ran %d times, want 1", n)
	}
	if s := w.Stats(); s.AlreadyDone != 1 || s.Busy != 0 {
		t.Errorf("stats %+v: want the copy ended as already done, not put back as busy", s)
	}
}

// firedCopy is a copy of job "remind" on queue q as the server fires it when it is
// due: what a stream leader that fired it once already may fire again. Every copy
// carries the schedule's headers, the enqueue id among them.
func firedCopy(q, due string) *nats.Msg {
	m := nats.NewMsg("workq." + q + ".jobs.remind")
	m.Header.Set("Workq-Scheduled-At", due)
	m.Header.Set("Workq-Enqueue", "enqueue-of-remind")
	m.Data = []byte("x")
	return m
}
