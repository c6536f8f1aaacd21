package consumer_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// deadLetters reads every message of the queue's dead-letter stream.
func deadLetters(t *testing.T, js jetstream.JetStream, q string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	s, err := js.Stream(ctx, "WORKQ_"+q+"_DEAD")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// Failed attempts are retried after the backoff's delay (measured between runs, with
// tolerance), and the record shows the error while the job waits.
func TestRetryWaitsForBackoff(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "retry"
	p := newProducer(t, js, q)
	f := &flaky{failures: 2, delay: 400 * time.Millisecond} // waits 400ms, then 800ms
	w := newWorker(t, js, q, f, consumer.Backoff(f.backoff))
	runWorker(t, w)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID("r1")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "first failure recorded", func() bool {
		r := status(t, p, "r1")
		return r.State == producer.StateRetrying && r.LastError == "flaky 1" && !r.RetryAt.IsZero()
	})
	testenv.Eventually(t, 10*time.Second, "the job to succeed", func() bool { return status(t, p, "r1").State == producer.StateDone })
	f.check(t)
	if r := status(t, p, "r1"); r.Attempt != 3 || r.LastError != "flaky 2" {
		t.Fatalf("final record %+v", r)
	}
}

// A job that keeps failing goes to dead letters after MaxAttempts, with headers that
// say which job it was, how many attempts, the last error and where it came from;
// the original leaves the jobs stream.
func TestExhaustedJobIsDeadLettered(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "exhaust"
	p := newProducer(t, js, q)
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		return errors.New("boom at " + strconv.Itoa(j.Attempt()))
	}), consumer.MaxAttempts(3), consumer.Backoff(consumer.Constant(10*time.Millisecond)))
	runWorker(t, w)
	info, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("payload"), producer.ID("e1"), producer.Kind("k"), producer.Header("X-Trace", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "dead letter", func() bool { return len(deadLetters(t, js, q)) == 1 })
	m := deadLetters(t, js, q)[0]
	want := map[string]string{
		"Workq-Job-Id": "e1", "Workq-Attempts": "3", "Workq-Queue": q,
		"Workq-Original-Subject": "workq." + q + ".jobs.e1", "Workq-Original-Sequence": strconv.FormatUint(info.Sequence, 10),
		"Workq-Kind": "k", "X-Trace": "t1",
	}
	for k, v := range want {
		if got := m.Header.Get(k); got != v {
			t.Errorf("dead letter header %s = %q, want %q", k, got, v)
		}
	}
	if e := m.Header.Get("Workq-Error"); !strings.Contains(e, "attempts exhausted") || !strings.Contains(e, "boom at 3") {
		t.Errorf("Workq-Error = %q", e)
	}
	if string(m.Data) != "payload" {
		t.Errorf("dead letter payload %q", m.Data)
	}
	testenv.Eventually(t, 5*time.Second, "the original to leave the stream", func() bool { return pendingMessages(t, js, q) == 0 })
	if r := status(t, p, "e1"); r.State != producer.StateDead || r.Attempt != 3 {
		t.Fatalf("record %+v", r)
	}
	testenv.Eventually(t, 5*time.Second, "the worker to count the dead letter", func() bool { return w.Stats().Dead == 1 })
	if s := w.Stats(); s.Dead != 1 || s.Retried != 2 || s.Started != 3 {
		t.Fatalf("stats %+v", s)
	}
}

// Permanent goes to dead letters at attempt 1; RetryAfter overrides the backoff; a
// per-job MaxAttempts overrides the worker's.
func TestPermanentRetryAfterAndJobLimit(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "outcomes"
	p := newProducer(t, js, q)
	var mu sync.Mutex
	starts := map[string][]time.Time{}
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		mu.Lock()
		starts[j.ID()] = append(starts[j.ID()], time.Now())
		mu.Unlock()
		switch j.ID() {
		case "perm":
			return consumer.Permanent(errors.New("bad request"))
		case "later":
			if j.Attempt() == 1 {
				return consumer.RetryAfter(300*time.Millisecond, errors.New("rate limited"))
			}
			return nil
		default: // "limit": fails until its own limit of 2
			return errors.New("nope")
		}
	}), consumer.Backoff(consumer.Constant(time.Hour)), consumer.MaxAttempts(10))
	runWorker(t, w)
	ctx := testenv.Context(t, 5*time.Second)
	for _, id := range []string{"perm", "later"} {
		if _, err := p.Enqueue(ctx, nil, producer.ID(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Enqueue(ctx, nil, producer.ID("limit"), producer.MaxAttempts(1)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "outcomes", func() bool {
		return status(t, p, "perm").State == producer.StateDead && status(t, p, "later").State == producer.StateDone &&
			status(t, p, "limit").State == producer.StateDead
	})
	mu.Lock()
	defer mu.Unlock()
	if n := len(starts["perm"]); n != 1 {
		t.Errorf("permanent error ran %d times", n)
	}
	if r := status(t, p, "perm"); !strings.Contains(r.LastError, "bad request") || r.Attempt != 1 {
		t.Errorf("perm record %+v", r)
	}
	if s := starts["later"]; len(s) != 2 || s[1].Sub(s[0]) < 300*time.Millisecond || s[1].Sub(s[0]) > time.Second {
		t.Errorf("RetryAfter(300ms) runs %v", s)
	}
	if n := len(starts["limit"]); n != 1 {
		t.Errorf("job with MaxAttempts(1) ran %d times", n)
	}
	if n := len(deadLetters(t, js, q)); n != 2 {
		t.Errorf("%d dead letters, want 2", n)
	}
}

// A panicking handler is an error carrying the stack; the worker survives and the job
// is retried and can succeed.
func TestPanicIsRecovered(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "panic"
	p := newProducer(t, js, q)
	lg := &textLog{}
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if j.Attempt() == 1 {
			var none []int
			_ = none[j.Attempt()] // index out of range: a real runtime panic
		}
		return nil
	}), consumer.Backoff(consumer.Constant(10*time.Millisecond)), consumer.Logger(lg.logger()))
	runWorker(t, w)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID("p1")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the retry to succeed", func() bool { return status(t, p, "p1").State == producer.StateDone })
	r := status(t, p, "p1")
	if r.Attempt != 2 || !strings.Contains(r.LastError, "handler panicked") || !strings.Contains(r.LastError, "goroutine") {
		t.Fatalf("record %+v", r)
	}
	// A panic is a bug: logged at error level, with its stack (issue 25).
	if ln := lg.line("job p1 failed; it will be retried"); !strings.Contains(ln, "level=ERROR") || !strings.Contains(ln, "stack=") || !strings.Contains(ln, "retry_test.go") {
		t.Fatalf("the panic's log line %q: want level ERROR with the stack", ln)
	}
}

// Exponential doubles its delay from base with every attempt until limit, and picks
// each delay at random in the upper half of that attempt's delay: within [d/2, d],
// spread over it. A constant or linear backoff fails this.
func TestExponentialDoublesWithJitter(t *testing.T) {
	t.Parallel()
	const base, limit = 100 * time.Millisecond, 5 * time.Second
	f := consumer.Exponential(base, limit)
	nominal := base
	for attempt := 1; attempt <= 12; attempt++ {
		lo, hi := nominal/2, nominal
		var smallest, largest time.Duration = hi + 1, -1
		for range 500 {
			d := f(attempt)
			if d < lo || d > hi {
				t.Fatalf("Exponential(%s, %s)(%d) = %s, want %s to %s", base, limit, attempt, d, lo, hi)
			}
			smallest, largest = min(smallest, d), max(largest, d)
		}
		// 500 draws in [d/2, d] all in one quarter of it: a chance of 2^-499.
		if spread := hi - lo; largest-smallest < spread/2 {
			t.Errorf("attempt %d: delays %s to %s, want spread over %s to %s (jitter)", attempt, smallest, largest, lo, hi)
		}
		nominal = min(2*nominal, limit) // 100ms, 200ms, … 3.2s, then 5s
	}
	if nominal != limit {
		t.Fatalf("the test did not reach the limit: %s", nominal)
	}
}
