package consumer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// enqueueRuns counts the runs of each enqueue (its Workq-Enqueue), and sets each
// run's result to its enqueue, so that the record says which enqueue committed.
type enqueueRuns struct {
	mu   sync.Mutex
	runs map[string]int
	hold map[string]chan struct{} // a run of a job with this payload waits until the channel is closed
}

func newEnqueueRuns() *enqueueRuns {
	return &enqueueRuns{runs: map[string]int{}, hold: map[string]chan struct{}{}}
}

func (e *enqueueRuns) Handle(ctx context.Context, j *consumer.Job) error {
	enq := j.Header().Get("Workq-Enqueue")
	e.mu.Lock()
	e.runs[enq]++
	hold := e.hold[string(j.Payload())]
	e.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	j.SetResult([]byte(enq))
	return nil
}

func (e *enqueueRuns) of(enq string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[enq]
}

// publishCopy stores msg in the stream as a server that forgot an earlier copy's
// message id would, waiting out the duplicate window of the id's last message (a
// publish within it is refused as a duplicate, which is the server working).
func publishCopy(t *testing.T, js jetstream.JetStream, msg *nats.Msg) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, "a copy stored past the duplicate window", func() bool {
		ack, err := js.PublishMsg(testenv.Context(t, 5*time.Second), msg)
		if err != nil {
			t.Fatal(err)
		}
		if ack.Duplicate {
			time.Sleep(100 * time.Millisecond)
		}
		return !ack.Duplicate
	})
}

// A copy of an enqueue that ended never runs, also once another enqueue of the same
// id holds the record: the record remembers the enqueues it was of. Job x is
// enqueued (E1) and committed; x is enqueued again after the duplicate window (E2),
// and while E2 runs, and again after it ended, a copy of E1 arrives (what a server
// that forgot E1's ack or message id delivers). E1 ran once, E2 once, and the record
// keeps E2's result. Before the record kept its ended enqueues, the copy waited for
// E2 to end, then ran as a new job and wrote E1's result over E2's.
func TestCopyOfAnEarlierEnqueueNeverRuns(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q, id = "earliercopy", "x"
	p := newProducer(t, js, q, producer.DuplicateWindow(time.Second))
	runs := newEnqueueRuns()
	w := newWorker(t, js, q, runs, consumer.AckWait(2*time.Second))
	runWorker(t, w)

	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("one"), producer.ID(id)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "E1 done", func() bool { return status(t, p, id).State == producer.StateDone })
	e1 := status(t, p, id).Enqueue
	copyOfE1 := &nats.Msg{Subject: "workq." + q + ".jobs." + id, Data: []byte("one"),
		Header: nats.Header{"Nats-Msg-Id": {id}, "Workq-Enqueue": {e1}}}

	// E2, once the window of E1's id has passed; it holds until released.
	release := make(chan struct{})
	runs.mu.Lock() // the worker runs: its handler reads hold
	runs.hold["two"] = release
	runs.mu.Unlock()
	var e2 string
	testenv.Eventually(t, 20*time.Second, "E2 stored past the window", func() bool {
		info, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("two"), producer.ID(id))
		if err != nil {
			t.Fatal(err)
		}
		if info.Duplicate {
			time.Sleep(100 * time.Millisecond)
		}
		return !info.Duplicate
	})
	testenv.Eventually(t, 10*time.Second, "E2 running", func() bool {
		r := status(t, p, id)
		if r.State == producer.StateRunning && r.Enqueue != e1 {
			e2 = r.Enqueue
			return true
		}
		return false
	})
	publishCopy(t, js, copyOfE1)
	// The copy is delivered while E2 runs: the worker puts it out of the way.
	testenv.Eventually(t, 10*time.Second, "the copy seen", func() bool { return w.Stats().AlreadyDone >= 1 })
	close(release)
	testenv.Eventually(t, 10*time.Second, "E2 done", func() bool { return status(t, p, id).State == producer.StateDone })

	publishCopy(t, js, copyOfE1) // and once E2 has ended
	testenv.Eventually(t, 10*time.Second, "both copies acked", func() bool {
		return w.Stats().AlreadyDone >= 2 && qaStreamMsgs(t, js, "WORKQ_"+q) == 0
	})
	if n, m := runs.of(e1), runs.of(e2); n != 1 || m != 1 {
		t.Fatalf("E1 ran %d times, E2 %d; want once each", n, m)
	}
	if r := status(t, p, id); r.State != producer.StateDone || string(r.Result) != e2 || r.Enqueue != e2 {
		t.Fatalf("record %s of enqueue %s with result %q; want done, E2's (%s)", r.State, r.Enqueue, r.Result, e2)
	}
}

// An enqueue repeated within the duplicate window never runs a second time, also when
// a restarted server forgot the first one's message id and stored the repeat: the
// record's store time says it is a repeat. One job is cancelled before it runs, one
// runs to done; the server restarts (it forgets the ids of removed messages), and each
// is enqueued again with the same id within the window. Before the record kept its
// enqueue's store time, the repeat ran, and the cancelled job's record went from
// cancelled to done.
func TestRepeatWithinTheWindowAfterARestartNeverRuns(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "repeatrestart"
	p := newProducer(t, js, q) // the default window: 2 minutes
	runs := newEnqueueRuns()
	ctx := testenv.Context(t, 30*time.Second)

	if _, err := p.Enqueue(ctx, []byte("c"), producer.ID("c1")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Cancel(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("d"), producer.ID("d1")); err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, js, q, runs, consumer.AckWait(2*time.Second))
	stop := runWorker(t, w)
	testenv.Eventually(t, 10*time.Second, "d1 done", func() bool { return status(t, p, "d1").State == producer.StateDone })
	testenv.Eventually(t, 10*time.Second, "the queue empty", func() bool { return qaStreamMsgs(t, js, "WORKQ_"+q) == 0 })
	stop()
	before := map[string]*producer.Record{"c1": status(t, p, "c1"), "d1": status(t, p, "d1")}
	if before["c1"].State != producer.StateCancelled {
		t.Fatalf("c1 is %s, want cancelled", before["c1"].State)
	}

	env.Restart(t)
	for _, id := range []string{"c1", "d1"} {
		var info producer.JobInfo
		var err error
		testenv.Eventually(t, 20*time.Second, "the repeat of "+id+" answered", func() bool {
			info, err = p.Enqueue(testenv.Context(t, 5*time.Second), []byte("again"), producer.ID(id))
			return err == nil || !errors.Is(err, context.DeadlineExceeded)
		})
		if err != nil {
			t.Fatal(err)
		}
		if info.Duplicate {
			t.Fatalf("the restarted server refused the repeat of %s as a duplicate: it remembered the id, and this test proves nothing", id)
		}
	}
	w2 := newWorker(t, env.JetStream(t), q, runs, consumer.AckWait(2*time.Second))
	runWorker(t, w2)
	testenv.Eventually(t, 15*time.Second, "both repeats acked", func() bool {
		return w2.Stats().AlreadyDone >= 2 && qaStreamMsgs(t, js, "WORKQ_"+q) == 0
	})
	for id, was := range before {
		r := status(t, p, id)
		if r.State != was.State || r.Enqueue != was.Enqueue || r.Revision != was.Revision {
			t.Errorf("%s: record %s of enqueue %s at revision %d; want it untouched: %s of %s at %d",
				id, r.State, r.Enqueue, r.Revision, was.State, was.Enqueue, was.Revision)
		}
	}
	if n := runs.of(before["d1"].Enqueue); n != 1 {
		t.Errorf("d1 ran %d times, want once", n)
	}
	if n := w2.Stats().Started; n != 0 {
		t.Errorf("%d runs started after the restart, want none", n)
	}
}
