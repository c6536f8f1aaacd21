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

// A second copy of one enqueue — the same job id and Workq-Enqueue, stored as a new
// message — is what a restarted server lets through: it forgets the ids of the jobs it
// no longer holds, so a producer retrying an enqueue whose reply was lost stores the
// job again. Whatever its delivery count, sequence or age, the copy of an enqueue whose
// record ended never runs: a done job's copy is acked, a cancelled job's copy is
// dropped (finding 2 of issue 24: it used to run and commit over the cancel). The test
// lets the copy through by shrinking the stream's duplicate window. A new enqueue of
// the id (another Workq-Enqueue, a requeue) does run (TestIDReusedAfterFinishedRecord).
func TestCopyOfAnEndedEnqueueNeverRuns(t *testing.T) {
	t.Parallel()
	for _, end := range []producer.State{producer.StateDone, producer.StateCancelled} {
		t.Run(string(end), func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t)
			js := env.JetStream(t)
			const q = "fdup"
			p := newProducer(t, js, q)
			var runs atomic.Int64
			w := newWorker(t, js, q, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
				if runs.Add(1) == 1 {
					j.SetResult([]byte("first"))
				} else {
					j.SetResult([]byte("copy"))
				}
				return nil
			}), consumer.AckWait(time.Second))
			ctx := testenv.Context(t, 30*time.Second)
			msg := func() *nats.Msg {
				m := &nats.Msg{Subject: "workq." + q + ".jobs.j1", Data: []byte("x"), Header: nats.Header{}}
				m.Header.Set("Nats-Msg-Id", "j1")
				m.Header.Set("Workq-Enqueue", "enqueue-1")
				return m
			}
			first, err := js.PublishMsg(ctx, msg())
			if err != nil {
				t.Fatal(err)
			}
			if end == producer.StateCancelled {
				if _, err := p.Cancel(ctx, "j1"); err != nil {
					t.Fatal(err)
				}
			}
			runWorker(t, w)
			testenv.Eventually(t, 10*time.Second, "the job "+string(end), func() bool { return status(t, p, "j1").State == end })

			s, err := js.Stream(ctx, "WORKQ_"+q)
			if err != nil {
				t.Fatal(err)
			}
			cfg := s.CachedInfo().Config
			cfg.Duplicates = 200 * time.Millisecond
			if _, err := js.UpdateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			// The server forgets the id once its (now short) window has passed and its
			// dedup timer has run. A reply at another sequence means the copy is stored;
			// it says Duplicate when an earlier try stored it and lost its reply (a busy
			// machine). The server purges old ids on a timer; a change of the window
			// resets it to fire at once, but if it fires before the server has taken the
			// new window it waits out the old one (2 minutes). So the window is changed
			// again (200 ↔ 250 ms) while the copy is refused, until the server takes it.
			testenv.Eventually(t, 10*time.Second, "the copy stored as a new message", func() bool {
				ack, err := js.PublishMsg(ctx, msg())
				if err != nil {
					t.Logf("publish of the copy: %v", err)
				}
				if err == nil && ack.Sequence != first.Sequence {
					return true
				}
				cfg.Duplicates = 450*time.Millisecond - cfg.Duplicates
				if _, err := js.UpdateStream(ctx, cfg); err != nil {
					t.Logf("update the window: %v", err)
				}
				return false
			})
			testenv.Eventually(t, 15*time.Second, "the copy ended", func() bool { return pendingMessages(t, js, q) == 0 })
			st := w.Stats()
			r := status(t, p, "j1")
			switch end {
			case producer.StateDone:
				if st.Committed != 1 || st.AlreadyDone == 0 || runs.Load() != 1 {
					t.Fatalf("worker %+v, %d runs: want the copy acked as done, not run", st, runs.Load())
				}
				if r.State != producer.StateDone || r.Sequence != first.Sequence || string(r.Result) != "first" {
					t.Fatalf("record %+v: want the first message's result", r)
				}
			case producer.StateCancelled:
				if st.Committed != 0 || st.Cancelled == 0 || runs.Load() != 0 {
					t.Fatalf("worker %+v, %d runs: want the copy dropped, not run", st, runs.Load())
				}
				if r.State != producer.StateCancelled {
					t.Fatalf("record %+v: want it cancelled still", r)
				}
			}
		})
	}
}
