package consumertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/attempt"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/quickstop"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Queue is the queue Work enqueues its job on, on a server of its own.
const Queue = "consumertest"

// stopGrace bounds how long a stopping worker may take: its open pulls end within a
// second, then the handler's context ends (its drain timeout is 0) and a handler that
// watches it returns.
const stopGrace = 10 * time.Second

// setupTimeout bounds setting up the queue, the job and the worker, which a loaded
// machine can make slow.
const setupTimeout = 30 * time.Second

// Outcome is what the worker did with the attempt.
type Outcome string

// The outcomes of an attempt.
const (
	// Committed: the handler returned nil; the job is done, its result in the record.
	Committed Outcome = "committed"
	// Retrying: the attempt failed and the job will run again after Result.Delay (the
	// handler's consumer.RetryAfter, or the worker's backoff). The worker counts it
	// "retried", as its logs and metrics name it.
	Retrying Outcome = "retried"
	// Dead: the job failed for good — consumer.Permanent, the last allowed attempt, a
	// malformed payload or an unknown kind — and is in the queue's dead letters.
	Dead Outcome = "dead"
	// Reassigned: another delivery claimed the job while the handler ran (the run's
	// claim went stale: consumer.ErrStale); nothing was committed. Work does not
	// arrange this; it reports it if it happens.
	Reassigned Outcome = "reassigned"
	// Stale is Reassigned, under its old name.
	//
	// Deprecated: use Reassigned, as the worker's logs and metrics name it.
	Stale = Reassigned
	// Cancelled: the job was cancelled while the handler ran (consumer.ErrCancelled);
	// nothing was committed and it will not run again. Work does not arrange this; it
	// reports it if it happens.
	Cancelled Outcome = "cancelled"
)

// Result is one attempt as the worker settled it.
type Result struct {
	// Outcome is what the worker did with the attempt.
	Outcome Outcome
	// Attempt is the attempt's number (Job.Attempt).
	Attempt int
	// Err is the error the worker acted on, nil when committed: the handler's as
	// returned (errors.Is finds its causes), wrapped in consumer.ErrExhausted when it
	// failed the last attempt, or consumer.ErrPanic when the handler panicked.
	Err error
	// Delay is how long the job waits before its next attempt, when Retrying.
	Delay time.Duration
	// Panic is what the handler panicked with, nil if it did not panic; Stack is the
	// goroutine's stack at the panic.
	Panic any
	Stack string
	// Record is the job record right after the worker wrote the outcome: its state,
	// attempt, result (Record.Result when committed), error and times. An unfenced
	// worker (consumer.Unfenced) writes none for a first attempt that succeeds: the
	// Record is then zero.
	Record producer.Record
}

// Work runs one attempt of h on a job whose payload is payload, on a worker of its
// own on an embedded server of its own (testenv.Start) that stops when the test ends,
// and returns what the worker did with it. The outcome is the worker's own: it
// reports from its commit, retry and dead-letter paths, after writing the job
// record, so a handler's nil can still come back Dead (its result too large to
// store) and an error Committed never does.
//
// The job is enqueued with a producer on Queue and run by a consumer.Worker, as in
// production; options set its id, kind, headers, attempt number and attempt limit,
// and pass options to the worker. Only this one attempt of h runs: a retry comes back
// as Retrying with its delay, it does not run. Work fails the test if the job cannot
// be enqueued or run, if the attempt is not settled within the Timeout option
// (DefaultTimeout), or if the worker could not write its outcome.
func Work(t testing.TB, h consumer.Handler, payload []byte, opts ...Option) *Result {
	t.Helper()
	if h == nil {
		t.Fatal("consumertest: Work: nil handler")
	}
	cfg := config{attempt: 1, timeout: DefaultTimeout}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	switch {
	case cfg.attempt < 1:
		t.Fatalf("consumertest: Attempt(%d): want 1 or more", cfg.attempt)
	case cfg.maxAttempts > 0 && cfg.attempt > cfg.maxAttempts:
		t.Fatalf("consumertest: Attempt(%d) is past MaxAttempts(%d)", cfg.attempt, cfg.maxAttempts)
	case cfg.timeout <= 0:
		t.Fatalf("consumertest: Timeout(%s): want > 0", cfg.timeout)
	}

	env := testenv.Start(t)
	js := env.JetStream(t)
	// Setting up (the queue, the job, the worker) has a bound of its own: Timeout is
	// the wait for the outcome only.
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	p, err := producer.New(ctx, js, Queue)
	if err != nil {
		t.Fatalf("consumertest: %v", err)
	}
	info, err := p.Enqueue(ctx, payload, enqueueOptions(cfg)...)
	if err != nil {
		t.Fatalf("consumertest: %v", err)
	}

	logs := &testLog{t: t}
	workerOpts := append([]consumer.Option{consumer.Logger(slog.New(slog.NewTextHandler(logs, nil))), consumer.Name("consumertest")},
		cfg.worker...)
	var ran atomic.Bool
	w, err := consumer.New(ctx, js, Queue, once(h, &ran), append(workerOpts, consumer.DrainTimeout(0))...)
	if err != nil {
		t.Fatalf("consumertest: %v", err)
	}
	if err := deliverEarlier(ctx, js, info, cfg.attempt-1); err != nil {
		t.Fatalf("consumertest: Attempt(%d): %v", cfg.attempt, err)
	}

	// The observer runs on the worker's goroutine, after the outcome is written and
	// before a job that will run again is put back: the record it reads is the one
	// the attempt wrote, and the worker is told to stop before it could run again.
	runCtx, stop := context.WithCancel(context.Background())
	settled := make(chan *Result, 1)
	var reported sync.Once
	observe := func(r attempt.Report) {
		if r.JobID != info.ID {
			return
		}
		reported.Do(func() {
			res := &Result{Attempt: r.Attempt, Err: r.Err, Delay: r.Delay}
			if r.Panicked {
				res.Panic, res.Stack = r.PanicValue, string(r.Stack)
			}
			var err error
			if res.Outcome, err = outcomeOf(r); err == nil {
				err = readRecord(p, info.ID, &res.Record)
			}
			if err != nil {
				res.Outcome, res.Err = "", err
			}
			stop()
			settled <- res
		})
	}
	var runErr error
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		// The server is discarded with the test: the worker need not let its open
		// pull expire when it stops (internal/quickstop), which took a second a test.
		runErr = w.Run(quickstop.With(attempt.WithObserver(runCtx, observe)))
	}()
	// The worker stops in the background once the attempt is settled; the test's
	// cleanup waits for it.
	waitStopped := func() bool {
		select {
		case <-stopped:
			return true
		case <-time.After(stopGrace):
			return false
		}
	}
	t.Cleanup(func() {
		stop()
		if !waitStopped() {
			t.Errorf("consumertest: the worker did not stop within %s: the handler of job %s must watch its context", stopGrace, info.ID)
		} else if runErr != nil {
			t.Errorf("consumertest: worker: %v", runErr)
		}
		logs.close()
	})

	var res *Result
	select {
	case res = <-settled:
	case <-time.After(cfg.timeout):
		stop()
		if !waitStopped() {
			t.Fatalf("consumertest: job %s was not settled within %s (Timeout option), and its handler did not return when its context ended: it must watch its context",
				info.ID, cfg.timeout)
		}
		why := "the worker reported no outcome"
		select {
		case res = <-settled: // the handler returned as the worker stopped
			why = fmt.Sprintf("the worker settled it %s only after that", res.Outcome)
			if res.Err != nil {
				why = "the handler was cut short: " + res.Err.Error()
			}
		default:
		}
		t.Fatalf("consumertest: job %s was not settled within %s (Timeout option); %s", info.ID, cfg.timeout, why)
	}
	if res.Outcome == "" {
		t.Fatalf("consumertest: job %s: %v", info.ID, res.Err)
	}
	if !ran.Load() {
		t.Fatalf("consumertest: job %s ended %s without running the handler (%v): is Attempt(%d) past the worker's attempt limit?",
			info.ID, res.Outcome, res.Err, cfg.attempt)
	}
	return res
}

// WorkArgs is Work for a typed job: its payload is args encoded as JSON and its kind
// args.Kind(), as producer.EnqueueArgs enqueues it. A Kind option is overridden.
func WorkArgs(t testing.TB, h consumer.Handler, args consumer.JobArgs, opts ...Option) *Result {
	t.Helper()
	j, err := producer.NewJob(args)
	if err != nil {
		t.Fatalf("consumertest: %v", err)
	}
	return Work(t, h, j.Payload, append(opts, Kind(j.Kind))...)
}

// enqueueOptions are the producer's options for the job cfg describes.
func enqueueOptions(cfg config) []producer.EnqueueOption {
	opts := []producer.EnqueueOption{producer.ID(cfg.id), producer.Kind(cfg.kind), producer.MaxAttempts(cfg.maxAttempts)}
	for _, h := range cfg.header {
		opts = append(opts, producer.Header(h[0], h[1]))
	}
	return opts
}

// once runs h on the first job it is given, setting ran. A later run (a retry the worker got
// before it stopped) waits for the worker to stop instead: Work reports one attempt.
func once(h consumer.Handler, ran *atomic.Bool) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if ran.CompareAndSwap(false, true) {
			return h.Handle(ctx, j)
		}
		<-ctx.Done()
		return context.Cause(ctx)
	})
}

// deliverEarlier makes the job's n earlier attempts: the queue's workers' consumer
// delivers the job n times and each is put back, and the job's record says n
// attempts ran and the last failed, with its retry due now — what a fenced worker
// counts attempts from (an unfenced one counts the deliveries).
func deliverEarlier(ctx context.Context, js jetstream.JetStream, info producer.JobInfo, n int) error {
	if n == 0 {
		return nil
	}
	names, err := queue.NamesFor(Queue)
	if err != nil {
		return err
	}
	c, err := js.Consumer(ctx, names.Stream, names.Consumer)
	if err != nil {
		return err
	}
	var enqueue string
	for i := range n {
		batch, err := c.Fetch(1, jetstream.FetchContext(ctx))
		if err != nil {
			return err
		}
		msg := <-batch.Messages()
		if msg == nil {
			return fmt.Errorf("delivery %d did not come: %v", i+1, batch.Error())
		}
		if err := msg.Nak(); err != nil {
			return err
		}
		enqueue = msg.Headers().Get(queue.HeaderEnqueue)
	}
	kv, err := js.KeyValue(ctx, names.Bucket)
	if err != nil {
		return err
	}
	now := time.Now()
	rec := record.Record{
		ID: info.ID, Queue: Queue, State: record.Retrying, Attempt: n, Enqueue: enqueue, Run: "consumertest-earlier",
		Sequence: info.Sequence, StartedAt: now, RetryAt: now, LastError: "an earlier attempt (consumertest.Attempt)",
	}
	b, err := rec.AppendJSON(nil)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, info.ID, b)
	return err
}

// outcomeOf is the Outcome of a worker's report; an outcome that is not one an
// attempt ends with is an error.
func outcomeOf(r attempt.Report) (Outcome, error) {
	switch r.Outcome {
	case attempt.Committed:
		return Committed, nil
	case attempt.Retrying:
		return Retrying, nil
	case attempt.Dead:
		return Dead, nil
	case attempt.Reassigned:
		return Reassigned, nil
	case attempt.Cancelled:
		return Cancelled, nil
	case attempt.HandedBack:
		return "", errors.New("the worker stopped before the handler returned; the job was handed back")
	}
	return "", fmt.Errorf("the worker could not settle the attempt: %w", r.Err)
}

// readRecord reads job id's record into rec. A job without one (an unfenced worker's
// first attempt that succeeded) leaves rec zero: Status then reports the job queued
// from its message while the worker's ack is on its way, at revision 0, which no
// record in the bucket has.
func readRecord(p *producer.Producer, id string, rec *producer.Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := p.Status(ctx, id)
	switch {
	case errors.Is(err, producer.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("reading the job record: %w", err)
	case r.Revision == 0:
		return nil
	}
	*rec = *r
	return nil
}

// testLog writes the worker's log lines to the test's log until it is closed.
type testLog struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func (l *testLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.t.Log("worker: " + strings.TrimSuffix(string(b), "\n"))
	}
	return len(b), nil
}

func (l *testLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}
