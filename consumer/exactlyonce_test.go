package consumer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Two worker pools on their own connections share thousands of jobs: every job is
// committed exactly once and its record says done with the result of the run that
// committed it.
func TestTwoPoolsCommitEachJobOnce(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	const q, n = "once", 3000
	p := newProducer(t, env.JetStream(t), q)
	ids := enqueueN(t, p, n, "job")

	var mu sync.Mutex
	runs := map[string]int{}
	handler := func(pool string) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
			mu.Lock()
			runs[j.ID()]++
			mu.Unlock()
			j.SetResult([]byte(pool))
			return nil
		})
	}
	w1 := newWorker(t, env.JetStream(t), q, handler("p1"), consumer.Concurrency(16), consumer.Name("p1"))
	w2 := newWorker(t, env.JetStream(t), q, handler("p2"), consumer.Concurrency(16), consumer.Name("p2"))
	stop1, stop2 := runWorker(t, w1), runWorker(t, w2)
	testenv.Eventually(t, 60*time.Second, "all jobs committed", func() bool {
		return w1.Stats().Committed+w2.Stats().Committed >= n
	})
	stop1()
	stop2()
	s1, s2 := w1.Stats(), w2.Stats()
	if s1.Committed+s2.Committed != n {
		t.Fatalf("committed %d + %d, want %d in all", s1.Committed, s2.Committed, n)
	}
	if s1.Committed == 0 || s2.Committed == 0 {
		t.Fatalf("one pool did all the work (%d / %d): not a test of sharing", s1.Committed, s2.Committed)
	}
	if s1.Reassigned+s2.Reassigned != 0 {
		t.Fatalf("reassignments without any stall: %d", s1.Reassigned+s2.Reassigned)
	}
	if pendingMessages(t, env.JetStream(t), q) != 0 {
		t.Fatal("jobs left in the stream")
	}
	for _, id := range ids {
		r := status(t, p, id)
		if r.State != producer.StateDone {
			t.Fatalf("job %s: %s", id, r.State)
		}
		if got := string(r.Result); got != r.Worker.Name {
			t.Fatalf("job %s: result from %s but committed by %s", id, got, r.Worker.Name)
		}
		if runs[id] != r.Attempt {
			t.Fatalf("job %s ran %d times, record says attempt %d", id, runs[id], r.Attempt)
		}
	}
}
