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

// The unfenced path (consumer.Unfenced): no claim, no commit, a plain ack; job
// records only for failures and for jobs that succeed after one. Attempt counts
// JetStream deliveries.

// A job that succeeds is acked and leaves the stream, and writes no record.
func TestUnfencedSuccessAcks(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "unf-ok"
	p := newProducer(t, js, q)
	var mu sync.Mutex
	runs := map[string]int{}
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		mu.Lock()
		defer mu.Unlock()
		runs[j.ID()]++
		if token, err := j.FencingToken(ctx); token != 0 || !errors.Is(err, consumer.ErrUnfenced) || j.Fence(ctx) != nil {
			return errors.New("an unfenced job has a fencing token or a failing fence")
		}
		return nil
	}), consumer.Unfenced())
	runWorker(t, w)
	ids := enqueueN(t, p, 5, "ok")
	testenv.Eventually(t, 10*time.Second, "all jobs acked", func() bool { return w.Stats().Committed == uint64(len(ids)) })
	testenv.Eventually(t, 5*time.Second, "the jobs to leave the stream", func() bool { return pendingMessages(t, js, q) == 0 })
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if runs[id] != 1 {
			t.Errorf("job %s ran %d times", id, runs[id])
		}
		if r, err := p.Status(testenv.Context(t, 5*time.Second), id); !errors.Is(err, producer.ErrNotFound) {
			t.Errorf("Status(%s) = %+v, %v; want ErrNotFound (no record for an unfenced first-attempt success)", id, r, err)
		}
	}
	if s := w.Stats(); s.Started != uint64(len(ids)) || s.Retried != 0 || s.Dead != 0 || s.Redelivered != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A failed attempt is recorded as retrying with its error, retried after the
// backoff's delay, and recorded done once it succeeds.
func TestUnfencedRetryAfterBackoff(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "unf-retry"
	p := newProducer(t, js, q)
	f := &flaky{failures: 1, delay: 400 * time.Millisecond}
	w := newWorker(t, js, q, f, consumer.Unfenced(), consumer.Name("u1"), consumer.Backoff(f.backoff))
	runWorker(t, w)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID("r1"), producer.Kind("k")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the failure recorded", func() bool {
		r := status(t, p, "r1")
		return r.State == producer.StateRetrying && r.LastError == "flaky 1" && r.Attempt == 1 && !r.RetryAt.IsZero()
	})
	testenv.Eventually(t, 10*time.Second, "the retry to succeed", func() bool { return status(t, p, "r1").State == producer.StateDone })
	r := status(t, p, "r1")
	if r.Attempt != 2 || r.Kind != "k" || r.Worker.Name != "u1" || r.FinishedAt.IsZero() {
		t.Fatalf("done record %+v", r)
	}
	testenv.Eventually(t, 5*time.Second, "the job to leave the stream", func() bool { return pendingMessages(t, js, q) == 0 })
	f.check(t)
	if s := w.Stats(); s.Started != 2 || s.Retried != 1 || s.Committed != 1 || s.Redelivered != 1 || s.Dead != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// checkDeadLetter checks the dead-letter copy of job id: its payload and the headers
// that say which job it was, where from and why.
func checkDeadLetter(t *testing.T, dead []*jetstream.RawStreamMsg, q, id string, seq uint64, attempts int, payload string, errHas ...string) {
	t.Helper()
	var m *jetstream.RawStreamMsg
	for _, d := range dead {
		if d.Header.Get("Workq-Job-Id") == id {
			m = d
		}
	}
	if m == nil {
		t.Errorf("no dead letter for job %s", id)
		return
	}
	want := map[string]string{
		"Workq-Queue": q, "Workq-Attempts": strconv.Itoa(attempts), "Workq-Kind": "k", "X-Trace": id,
		"Workq-Original-Subject": "workq." + q + ".jobs." + id, "Workq-Original-Sequence": strconv.FormatUint(seq, 10),
	}
	for k, v := range want {
		if got := m.Header.Get(k); got != v {
			t.Errorf("job %s: dead letter header %s = %q, want %q", id, k, got, v)
		}
	}
	for _, s := range errHas {
		if e := m.Header.Get("Workq-Error"); !strings.Contains(e, s) {
			t.Errorf("job %s: Workq-Error = %q, want it to say %q", id, e, s)
		}
	}
	if m.Header.Get("Workq-Dead-At") == "" {
		t.Errorf("job %s: no Workq-Dead-At header: %v", id, m.Header)
	}
	if string(m.Data) != payload {
		t.Errorf("job %s: dead letter payload %q, want %q", id, m.Data, payload)
	}
}

// A permanent error dead-letters the job at once; a job that keeps failing is
// dead-lettered when its attempts run out. Both leave the jobs stream.
func TestUnfencedPermanentAndExhaustedGoToDeadLetters(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "unf-dead"
	p := newProducer(t, js, q)
	var mu sync.Mutex
	runs := map[string]int{}
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		mu.Lock()
		runs[j.ID()]++
		mu.Unlock()
		if j.ID() == "perm" {
			return consumer.Permanent(errors.New("bad request"))
		}
		return errors.New("boom at " + strconv.Itoa(j.Attempt()))
	}), consumer.Unfenced(), consumer.MaxAttempts(3), consumer.Backoff(consumer.Constant(10*time.Millisecond)))
	runWorker(t, w)
	ctx := testenv.Context(t, 5*time.Second)
	seqs := map[string]uint64{}
	for _, id := range []string{"perm", "exhaust"} {
		info, err := p.Enqueue(ctx, []byte("payload of "+id), producer.ID(id), producer.Kind("k"), producer.Header("X-Trace", id))
		if err != nil {
			t.Fatal(err)
		}
		seqs[id] = info.Sequence
	}
	testenv.Eventually(t, 10*time.Second, "two dead letters", func() bool { return len(deadLetters(t, js, q)) == 2 })
	dead := deadLetters(t, js, q)
	checkDeadLetter(t, dead, q, "perm", seqs["perm"], 1, "payload of perm", "bad request")
	checkDeadLetter(t, dead, q, "exhaust", seqs["exhaust"], 3, "payload of exhaust", "attempts exhausted", "boom at 3")
	testenv.Eventually(t, 5*time.Second, "the originals to leave the stream", func() bool { return pendingMessages(t, js, q) == 0 })
	testenv.Eventually(t, 5*time.Second, "the dead letters counted", func() bool { return w.Stats().Dead == 2 })
	if r := status(t, p, "perm"); r.State != producer.StateDead || r.Attempt != 1 || !strings.Contains(r.LastError, "bad request") {
		t.Errorf("perm record %+v", r)
	}
	if r := status(t, p, "exhaust"); r.State != producer.StateDead || r.Attempt != 3 || !strings.Contains(r.LastError, "boom at 3") {
		t.Errorf("exhaust record %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs["perm"] != 1 || runs["exhaust"] != 3 {
		t.Errorf("runs %v, want perm 1, exhaust 3", runs)
	}
	if s := w.Stats(); s.Dead != 2 || s.Retried != 2 || s.Started != 4 || s.Committed != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A worker that stops while a job runs past the drain timeout cancels the handler and
// hands the job back; another worker gets it at once (not after AckWait) and its
// success is recorded.
func TestUnfencedShutdownHandsRunningJobBack(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "unf-drain"
	p := newProducer(t, js, q)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("slow"), producer.ID("slow-1")); err != nil {
		t.Fatal(err)
	}
	const ackWait = 30 * time.Second
	started := make(chan struct{})
	ended := make(chan error, 1)
	w1 := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		close(started)
		<-ctx.Done()
		ended <- context.Cause(ctx)
		return ctx.Err()
	}), consumer.Unfenced(), consumer.Name("w1"), consumer.Concurrency(1), consumer.AckWait(ackWait),
		consumer.DrainTimeout(300*time.Millisecond))
	r1 := qaStart(t, w1)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not start")
	}
	took, err := r1.stop(t, 5*time.Second)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took < 250*time.Millisecond || took > 5*time.Second { // pulls expire within 1s; room for a loaded machine
		t.Errorf("Run returned %s after cancel with DrainTimeout(300ms)", took)
	}
	if cause := <-ended; cause == nil || !strings.Contains(cause.Error(), "drain") {
		t.Errorf("handler context cause %v does not say the worker drained", cause)
	}
	if s := w1.Stats(); s.HandedBack != 1 || s.Committed != 0 || s.Retried != 0 || s.Dead != 0 {
		t.Fatalf("w1 stats %+v: want the job handed back, nothing else", s)
	}

	attempts := make(chan int, 4)
	w2 := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		attempts <- j.Attempt()
		return nil
	}), consumer.Unfenced(), consumer.Name("w2"), consumer.AckWait(ackWait))
	picked := time.Now()
	qaStart(t, w2)
	testenv.Eventually(t, 10*time.Second, "w2 to finish the job", func() bool { return w2.Stats().Committed == 1 })
	if d := time.Since(picked); d > ackWait/3 {
		t.Fatalf("handed-back job took %s to come back", d)
	}
	if a := <-attempts; a != 2 {
		t.Errorf("w2 saw Attempt() = %d, want 2 (unfenced attempts count deliveries)", a)
	}
	testenv.Eventually(t, 5*time.Second, "work queue empty", func() bool { return pendingMessages(t, js, q) == 0 })
	r := status(t, p, "slow-1")
	if r.State != producer.StateDone || r.Worker.Name != "w2" {
		t.Fatalf("final record %+v", r)
	}
	if len(attempts) != 0 {
		t.Fatal("job ran again")
	}
}
