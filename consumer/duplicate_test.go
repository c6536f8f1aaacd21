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

// A second message for a job that is done, stored within the queue's duplicate
// window of the first, is a copy the server should have refused: a restarted server
// forgets the ids of the jobs it no longer holds, so a producer retrying an enqueue
// whose reply was lost stores them again. The worker never commits such a copy: the
// job keeps its one result. (The test lets the copy through by shrinking the
// stream's window after the worker read it.) A message under another message id —
// a requeue — does run the job again (TestIDReusedAfterFinishedRecord).
func TestForgottenDuplicateIsNotCommittedAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		delay time.Duration
		runs  int64 // runs of the copy: a lazy first claim runs it before it learns
	}{{"lazy first claim", 10 * time.Millisecond, -1}, {"claim first", 0, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.Start(t)
			js := env.JetStream(t)
			const q = "fdup"
			p := newProducer(t, js, q)
			var runs atomic.Int64
			w := newWorker(t, js, q, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
				runs.Add(1)
				j.SetResult([]byte("first"))
				if runs.Load() > 1 {
					j.SetResult([]byte("copy"))
				}
				return nil
			}), consumer.AckWait(time.Second), consumer.ClaimDelay(tc.delay))
			runWorker(t, w)
			ctx := testenv.Context(t, 20*time.Second)
			first, err := p.Enqueue(ctx, []byte("x"), producer.ID("j1"))
			if err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 10*time.Second, "the job done", func() bool { return w.Stats().Committed == 1 })

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
			// it says Duplicate when the enqueue that stored it lost its reply (a busy
			// machine) and this one was refused as the copy's duplicate.
			// The server purges old ids on a timer; a change of the window resets it to
			// fire at once, but if it fires before the server has taken the new window
			// it waits out the old one (2 minutes). So the window is changed again
			// (200 ↔ 250 ms) while the copy is refused, until the server takes it.
			var copyInfo producer.JobInfo
			testenv.Eventually(t, 10*time.Second, "the copy stored as a new message", func() bool {
				copyInfo, err = p.Enqueue(ctx, []byte("x"), producer.ID("j1"))
				if err != nil {
					t.Logf("enqueue of the copy: %v", err)
				}
				if err == nil && copyInfo.Sequence != first.Sequence {
					return true
				}
				cfg.Duplicates = 450*time.Millisecond - cfg.Duplicates
				if _, err := js.UpdateStream(ctx, cfg); err != nil {
					t.Logf("update the window: %v", err)
				}
				return false
			})
			testenv.Eventually(t, 15*time.Second, "the copy acked", func() bool { return pendingMessages(t, js, q) == 0 })
			st := w.Stats()
			if st.Committed != 1 || st.AlreadyDone == 0 {
				t.Fatalf("worker %+v: want the copy acked as done, not committed", st)
			}
			r := status(t, p, "j1")
			if r.State != producer.StateDone || r.Sequence != first.Sequence || string(r.Result) != "first" {
				t.Fatalf("record %+v: want the first message's result", r)
			}
			if tc.runs >= 0 && runs.Load()-1 != tc.runs {
				t.Fatalf("the copy ran %d times, want %d", runs.Load()-1, tc.runs)
			}
		})
	}
}
