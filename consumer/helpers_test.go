package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// quiet is a logger that drops everything; tests that check logs use a logRecorder.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// logRecorder keeps log messages so tests can look for "job X was reassigned".
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

// hasPrefix reports whether a logged message starts with prefix.
func (l *logRecorder) hasPrefix(prefix string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// all returns the messages logged so far.
func (l *logRecorder) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

func (l *logRecorder) has(msg string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if m == msg {
			return true
		}
	}
	return false
}

// runWorker starts w.Run in the background; the returned stop cancels it and waits,
// failing the test if Run returned an error.
func runWorker(t *testing.T, w *consumer.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("worker %s: Run: %v", w.Name(), err)
				}
			case <-time.After(60 * time.Second):
				t.Errorf("worker %s: Run did not return within 60s of cancel", w.Name())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func newProducer(t *testing.T, js jetstream.JetStream, q string, opts ...producer.Option) *producer.Producer {
	t.Helper()
	p, err := producer.New(testenv.Context(t, 30*time.Second), js, q, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newWorker(t *testing.T, js jetstream.JetStream, q string, h consumer.Handler, opts ...consumer.Option) *consumer.Worker {
	t.Helper()
	w, err := consumer.New(testenv.Context(t, 30*time.Second), js, q, h, append([]consumer.Option{consumer.Logger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func enqueueN(t *testing.T, p *producer.Producer, n int, prefix string) []string {
	t.Helper()
	jobs := make([]producer.Job, n)
	ids := make([]string, n)
	for i := range jobs {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
		jobs[i] = producer.Job{ID: ids[i], Payload: []byte(ids[i])}
	}
	res, err := p.EnqueueBatch(testenv.Context(t, 60*time.Second), jobs)
	if err != nil {
		t.Fatalf("EnqueueBatch: %v (first result err: %v)", err, res[0].Err)
	}
	return ids
}

func status(t *testing.T, p *producer.Producer, id string) *producer.Record {
	t.Helper()
	r, err := p.Status(testenv.Context(t, 10*time.Second), id)
	if err != nil {
		t.Fatalf("Status(%s): %v", id, err)
	}
	return r
}

// flaky is a handler that fails the first failures attempts of a job with "flaky
// <attempt>", and a backoff that records the attempts it is asked about and waits
// delay × attempt; starts is when each run began.
type flaky struct {
	failures int
	delay    time.Duration
	mu       sync.Mutex
	starts   []time.Time
	asked    []int
}

func (f *flaky) Handle(_ context.Context, j *consumer.Job) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, time.Now())
	if j.Attempt() <= f.failures {
		return errors.New("flaky " + strconv.Itoa(j.Attempt()))
	}
	return nil
}

func (f *flaky) backoff(attempt int) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, attempt)
	return f.delay * time.Duration(attempt)
}

// check asserts that every failure was retried once, after its backoff (with 500ms of
// tolerance): failures+1 runs, the backoff asked for attempts 1…failures.
func (f *flaky) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.starts) != f.failures+1 || len(f.asked) != f.failures {
		t.Fatalf("%d runs, backoff asked for %v; want %d runs", len(f.starts), f.asked, f.failures+1)
	}
	for i, a := range f.asked {
		want := f.delay * time.Duration(i+1)
		if a != i+1 {
			t.Fatalf("backoff asked for %v, want attempts 1…%d", f.asked, f.failures)
		}
		if got := f.starts[i+1].Sub(f.starts[i]); got < want || got > want+500*time.Millisecond {
			t.Errorf("gap before attempt %d = %s, want %s (+500ms tolerance)", i+2, got, want)
		}
	}
}

// doomedWorker runs worker "A" on queue q over a connection of its own, with opts
// and a handler that holds every job until the worker stops; started receives a
// value as each job starts. die is its process's death (killableWorker).
func doomedWorker(t *testing.T, env *testenv.Env, q string, opts []consumer.Option) (started <-chan struct{}, die func()) {
	t.Helper()
	s := make(chan struct{}, 1)
	die = killableWorker(t, env, q, "A", func(*consumer.Job) { s <- struct{}{} }, opts)
	return s, die
}

// killableWorker runs worker name on queue q over a connection of its own, with opts
// and a handler that calls started, then holds the job until the worker stops. die is
// its process's death: its connection closes (from then on nothing of it reaches the
// server) and the worker stops.
func killableWorker(t *testing.T, env *testenv.Env, q, name string, started func(*consumer.Job), opts []consumer.Option) (die func()) {
	t.Helper()
	nc := env.Conn(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		started(j)
		<-ctx.Done()
		return ctx.Err()
	}), append(opts, consumer.Name(name), consumer.DrainTimeout(0))...)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	die = func() {
		once.Do(func() {
			nc.Close()
			stop()
			<-done
		})
	}
	t.Cleanup(die)
	return die
}
