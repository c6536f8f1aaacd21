package consumer_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// ---- helpers shared by shutdown_test.go, restart_test.go and badinput_test.go ----

// qaRun starts w.Run on its own context; cancel stops it, done receives Run's error.
type qaRun struct {
	w      *consumer.Worker
	cancel context.CancelFunc
	done   chan error
}

func qaStart(t *testing.T, w *consumer.Worker) *qaRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &qaRun{w: w, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Errorf("worker %s: Run did not return within 30s of cancel", w.Name())
		}
	})
	return r
}

// stop cancels Run and waits up to limit for it; it returns how long that took and
// Run's error.
func (r *qaRun) stop(t *testing.T, limit time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // keep it for the cleanup
		return time.Since(start), err
	case <-time.After(limit):
		t.Fatalf("worker %s: Run did not return within %s of cancel", r.w.Name(), limit)
		return 0, nil
	}
}

func qaCommitted(ws ...*consumer.Worker) uint64 {
	var n uint64
	for _, w := range ws {
		n += w.Stats().Committed
	}
	return n
}

func qaStreamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Logf("stream %s: %v", stream, err)
		return ^uint64(0)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Logf("stream %s info: %v", stream, err)
		return ^uint64(0)
	}
	return info.State.Msgs
}

// qaCounter counts handler runs that returned nil, per job id.
type qaCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *qaCounter) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[id]++
}

func (c *qaCounter) get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// qaCheckAllDone checks that every id's record is done after exactly one counted run
// and returns the records.
func qaCheckAllDone(t *testing.T, p *producer.Producer, ids []string, runs *qaCounter) map[string]*producer.Record {
	t.Helper()
	recs := map[string]*producer.Record{}
	bad := 0
	for _, id := range ids {
		r := status(t, p, id)
		recs[id] = r
		if r.State != producer.StateDone || r.Attempt < 1 || r.FinishedAt.IsZero() || r.Worker.IsZero() {
			if bad++; bad <= 5 {
				t.Errorf("job %s: %+v", id, r)
			}
		}
		if runs != nil && runs.get(id) < 1 {
			if bad++; bad <= 5 {
				t.Errorf("job %s: handler never returned nil, yet %s", id, r.State)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d jobs not done as expected", bad, len(ids))
	}
	return recs
}

// ---- issue test 5: graceful shutdown with jobs in flight ----

func TestShutdownWithJobsInFlightLosesNoneCommitsNoneTwice(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "shut")
	const n = 200
	ids := enqueueN(t, p, n, "sj")

	var runs qaCounter
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		select {
		case <-time.After(time.Duration(50+rand.IntN(150)) * time.Millisecond):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		runs.add(j.ID())
		j.SetResult([]byte(j.ID()))
		return nil
	})
	const drain = 5 * time.Second
	opts := []consumer.Option{consumer.Concurrency(8), consumer.DrainTimeout(drain)}
	w1 := newWorker(t, js, "shut", h, append(opts, consumer.Name("w1"))...)
	w2 := newWorker(t, js, "shut", h, append(opts, consumer.Name("w2"))...)
	r1 := qaStart(t, w1)
	r2 := qaStart(t, w2)

	testenv.Eventually(t, 20*time.Second, "some jobs committed", func() bool { return qaCommitted(w1, w2) >= 40 })
	if w1.Stats().Committed == 0 {
		testenv.Eventually(t, 10*time.Second, "w1 to commit", func() bool { return w1.Stats().Committed > 0 })
	}
	took, err := r1.stop(t, drain+5*time.Second)
	if err != nil {
		t.Fatalf("w1 Run after cancel: %v", err)
	}
	s1 := w1.Stats()
	t.Logf("w1 stopped in %s: %+v", took, s1)
	// Runs in flight at cancel finished (they take ≤ 200ms, well inside the drain
	// timeout) and committed; nothing was cut short.
	if s1.Started != s1.Committed || s1.Retried != 0 || s1.Errors != 0 || s1.Reassigned != 0 {
		t.Fatalf("w1 did not finish its in-flight jobs cleanly: %+v", s1)
	}
	if took > 5*time.Second { // far below the default 30s drain timeout, with room for a loaded machine
		t.Errorf("w1 took %s to stop with ≤200ms jobs in flight", took)
	}
	if c := qaCommitted(w1, w2); c >= n {
		t.Fatalf("all %d jobs were committed before w1 stopped; the test proves nothing", c)
	}
	// w1 does nothing more after Run returned.
	testenv.Eventually(t, 30*time.Second, "w2 to finish the rest", func() bool { return qaCommitted(w1, w2) >= n })
	testenv.Eventually(t, 10*time.Second, "work queue empty", func() bool { return qaStreamMsgs(t, js, "WORKQ_shut") == 0 })
	if s := w1.Stats(); s != s1 {
		t.Fatalf("w1 kept working after Run returned: %+v then %+v", s1, s)
	}
	if _, err := r2.stop(t, drain+5*time.Second); err != nil {
		t.Fatalf("w2 Run: %v", err)
	}
	s2 := w2.Stats()
	if got := qaCommitted(w1, w2); got != n {
		t.Fatalf("committed %d times for %d jobs: w1 %+v w2 %+v", got, n, s1, s2)
	}
	recs := qaCheckAllDone(t, p, ids, &runs)
	byWorker := map[string]uint64{}
	for _, id := range ids {
		r := recs[id]
		// Every job ran to completion exactly once: no handler returned nil twice, so
		// none was redelivered after a successful run, and the record counts one attempt.
		if c := runs.get(id); c != 1 || r.Attempt != 1 || string(r.Result) != id {
			t.Errorf("job %s: %d successful runs, record attempt %d result %q", id, c, r.Attempt, r.Result)
		}
		byWorker[r.Worker.Name]++
	}
	if byWorker["w1"] != s1.Committed || byWorker["w2"] != s2.Committed {
		t.Errorf("records name w1 %d / w2 %d times, stats say %d / %d", byWorker["w1"], byWorker["w2"], s1.Committed, s2.Committed)
	}
	if s1.Dead+s2.Dead != 0 || s2.Reassigned != 0 {
		t.Errorf("unexpected outcomes: w1 %+v w2 %+v", s1, s2)
	}
}

func TestShutdownDrainTimeoutHandsJobBack(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "drain")
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("slow"), producer.ID("slow-1")); err != nil {
		t.Fatal(err)
	}
	const ackWait = 30 * time.Second
	started := make(chan struct{})
	type end struct {
		at    time.Time
		cause error
	}
	ended := make(chan end, 1)
	blocker := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		close(started)
		<-ctx.Done()
		ended <- end{time.Now(), context.Cause(ctx)}
		return ctx.Err()
	})
	w1 := newWorker(t, js, "drain", blocker, consumer.Name("w1"), consumer.Concurrency(1),
		consumer.AckWait(ackWait), consumer.DrainTimeout(300*time.Millisecond))
	r1 := qaStart(t, w1)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not start")
	}
	// The claim is written before the handler starts.
	testenv.Eventually(t, 5*time.Second, "the record to show the job running", func() bool {
		r := status(t, p, "slow-1")
		return r.State == producer.StateRunning && r.Attempt == 1
	})
	cancelled := time.Now()
	took, err := r1.stop(t, 5*time.Second)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	e := <-ended
	if wait := e.at.Sub(cancelled); wait < 250*time.Millisecond {
		t.Fatalf("handler context ended %s after cancel, before the 300ms drain timeout", wait)
	}
	if took > 5*time.Second { // pulls expire within 1s; room for a loaded machine
		t.Fatalf("Run returned %s after cancel with DrainTimeout(300ms)", took)
	}
	if e.cause == nil || !strings.Contains(e.cause.Error(), "drain") {
		t.Errorf("handler context cause %v does not say the worker drained", e.cause)
	}
	s1 := w1.Stats()
	if s1.Committed != 0 || s1.Retried != 0 || s1.HandedBack != 1 || s1.Dead != 0 {
		t.Fatalf("w1 stats %+v: want the job handed back, nothing else", s1)
	}
	r := status(t, p, "slow-1")
	if r.State != producer.StateQueued || r.Attempt != 0 {
		t.Fatalf("record after hand back: %+v; want queued with the attempt not counted", r)
	}
	t.Logf("Run returned %s after cancel; handler ended after %s", took, e.at.Sub(cancelled))

	// A new worker gets it at once (the hand back was a Nak, not a wait for AckWait).
	attempts := make(chan int, 4)
	w2 := newWorker(t, js, "drain", consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		attempts <- j.Attempt()
		return nil
	}), consumer.Name("w2"), consumer.AckWait(ackWait))
	picked := time.Now()
	qaStart(t, w2)
	testenv.Eventually(t, 10*time.Second, "w2 to commit the job", func() bool { return status(t, p, "slow-1").State == producer.StateDone })
	if d := time.Since(picked); d > ackWait/3 {
		t.Fatalf("handed-back job took %s to come back", d)
	}
	if a := <-attempts; a != 1 {
		t.Fatalf("w2 saw Attempt() = %d, want 1", a)
	}
	r = status(t, p, "slow-1")
	if r.Attempt != 1 || r.Worker.Name != "w2" {
		t.Fatalf("final record %+v", r)
	}
	// The worker counts a commit after its record's write, which the test saw: wait
	// for the count (it once read the stats between the two).
	testenv.Eventually(t, 5*time.Second, "w2 to count its commit", func() bool { return w2.Stats().Committed == 1 })
	if s := w2.Stats(); s.Committed != 1 || s.Started != 1 {
		t.Fatalf("w2 stats %+v", s)
	}
	testenv.Eventually(t, 5*time.Second, "work queue empty", func() bool { return qaStreamMsgs(t, js, "WORKQ_drain") == 0 })
	if len(attempts) != 0 {
		t.Fatalf("job ran again")
	}
}
