package consumer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Timeout ends a run's context after d, with a cause naming the timeout; the run
// counts as failed and is retried, and the job is dead-lettered once its attempts
// are used up. The handler blocks on its context, as a handler waiting on a slow
// call does, and returns its error.
func TestTimeoutEndsTheRun(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "timeout"
	const d = 300 * time.Millisecond
	p := newProducer(t, js, q)
	type run struct {
		started, ended time.Time
		deadline       time.Time
		hasDeadline    bool
		err, cause     error
	}
	var mu sync.Mutex
	var runs []run
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		r := run{started: time.Now()}
		r.deadline, r.hasDeadline = ctx.Deadline()
		<-ctx.Done()
		r.ended, r.err, r.cause = time.Now(), ctx.Err(), context.Cause(ctx)
		mu.Lock()
		runs = append(runs, r)
		mu.Unlock()
		return r.cause
	}), consumer.Timeout(d), consumer.MaxAttempts(2), consumer.Backoff(consumer.Constant(10*time.Millisecond)),
		consumer.AckWait(5*time.Second), consumer.DrainTimeout(0))
	runWorker(t, w)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID("slow")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "the job to be dead-lettered", func() bool { return len(deadLetters(t, js, q)) == 1 })

	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2 (MaxAttempts 2)", len(runs))
	}
	for i, r := range runs {
		if !r.hasDeadline || r.deadline.After(r.started.Add(d)) || !r.deadline.After(r.started.Add(-d)) {
			t.Errorf("run %d: context deadline %v (set: %v), want at most %s after the run started at %s", i+1, r.deadline, r.hasDeadline, d, r.started)
		}
		if r.ended.Before(r.deadline) {
			t.Errorf("run %d: context ended at %s, before its deadline %s", i+1, r.ended, r.deadline)
		}
		if !errors.Is(r.err, context.DeadlineExceeded) || r.cause == nil || !strings.Contains(r.cause.Error(), "timeout 300ms passed") {
			t.Errorf("run %d: context ended with %v, cause %v; want a deadline whose cause names the timeout", i+1, r.err, r.cause)
		}
	}
	if got := deadLetters(t, js, q)[0].Header.Get("Workq-Error"); !strings.Contains(got, "attempts exhausted") || !strings.Contains(got, "timeout 300ms passed") {
		t.Errorf("Workq-Error %q", got)
	}
	if r := status(t, p, "slow"); r.State != producer.StateDead || r.Attempt != 2 {
		t.Errorf("record %s at attempt %d, want dead at 2", r.State, r.Attempt)
	}
	// The worker counts the dead letter once it is published: wait for it.
	testenv.Eventually(t, 5*time.Second, "the worker to count the dead letter", func() bool { return w.Stats().Dead == 1 })
	if s := w.Stats(); s.Started != 2 || s.Retried != 1 || s.Committed != 0 {
		t.Errorf("stats %+v: want 2 started, 1 retried, 1 dead, none committed", s)
	}
}
