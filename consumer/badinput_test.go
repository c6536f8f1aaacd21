package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/badinput"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// ---- issue test 7: bad input ----

var qaNop = consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil })

func TestBadInputNewRejectsNamesHandlersAndOptions(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	for _, q := range []string{"", "a.b", "a*", "a b", ">", strings.Repeat("a", 65)} {
		w, err := consumer.New(ctx, js, q, qaNop, consumer.Logger(quiet))
		if !errors.Is(err, consumer.ErrInvalidName) || w != nil {
			t.Errorf("New(%q) = %v, %v; want ErrInvalidName", q, w, err)
		}
	}
	if w, err := consumer.New(ctx, js, "ok", nil); !errors.Is(err, consumer.ErrInvalidOption) || w != nil {
		t.Errorf("nil handler: %v, %v; want ErrInvalidOption", w, err)
	}
	// Each bad option is refused with an error wrapping ErrInvalidOption that names
	// the option and its value (want), without a round trip to the server.
	bad := []struct {
		opts []consumer.Option
		want string
	}{
		{[]consumer.Option{consumer.Concurrency(0)}, "Concurrency(0): want at least 1"},
		{[]consumer.Option{consumer.Concurrency(-1)}, "Concurrency(-1): want at least 1"},
		{[]consumer.Option{consumer.Prefetch(-1)}, "Prefetch(-1): want 0 or more"},
		{[]consumer.Option{consumer.AckWait(time.Millisecond)}, "AckWait(1ms): want at least 100ms"},
		{[]consumer.Option{consumer.MaxAttempts(0)}, "MaxAttempts(0): want at least 1"},
		{[]consumer.Option{consumer.MaxAttempts(-3)}, "MaxAttempts(-3): want at least 1"},
		{[]consumer.Option{consumer.Heartbeat(0)}, "Heartbeat(0s): want at least 10ms"},
		{[]consumer.Option{consumer.AckWait(time.Second), consumer.Heartbeat(time.Second)}, "Heartbeat(1s): want shorter than AckWait (1s)"},
		{[]consumer.Option{consumer.DrainTimeout(-time.Second)}, "DrainTimeout(-1s): want 0 or more"},
		{[]consumer.Option{consumer.Timeout(0)}, "Timeout(0s): want more than 0"},
		{[]consumer.Option{consumer.Name("")}, `Name(""): want a non-empty name`},
		{[]consumer.Option{consumer.Logger(nil)}, "Logger(nil): want a logger"},
		{[]consumer.Option{consumer.Backoff(nil)}, "Backoff(nil): want a function"},
		{[]consumer.Option{consumer.MaxAckPending(0)}, "MaxAckPending(0): want at least 1"},
		{[]consumer.Option{consumer.Replicas(0)}, "Replicas(0): want 1 to 5"},
		{[]consumer.Option{consumer.Replicas(6)}, "Replicas(6): want 1 to 5"},
	}
	for _, c := range bad {
		start := time.Now()
		w, err := consumer.New(ctx, js, "opts", qaNop, append([]consumer.Option{consumer.Logger(quiet)}, c.opts...)...)
		if !errors.Is(err, consumer.ErrInvalidOption) || w != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, %v; want an ErrInvalidOption saying so", c.want, w, err)
		}
		if time.Since(start) > time.Second {
			t.Errorf("%s: took %s to fail", c.want, time.Since(start))
		}
	}
	// A valid option the server cannot honour is refused too, promptly, and is not
	// an invalid option.
	start := time.Now()
	if w, err := consumer.New(ctx, js, "opts", qaNop, consumer.Logger(quiet), consumer.Replicas(3)); err == nil || w != nil || errors.Is(err, consumer.ErrInvalidOption) {
		t.Errorf("Replicas(3) on one server: %v, %v; want an error that is not ErrInvalidOption", w, err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("Replicas(3) on one server: took %s to fail", time.Since(start))
	}
	// None of the rejected options left a consumer behind with their settings.
	if s, err := js.Stream(ctx, "WORKQ_opts"); err == nil {
		for c := range s.ListConsumers(ctx).Info() {
			t.Errorf("consumer %s created by a rejected New (AckWait %s)", c.Name, c.Config.AckWait)
		}
	}
	// And a worker with good options works.
	if _, err := consumer.New(ctx, js, "opts", qaNop, consumer.Logger(quiet), consumer.Concurrency(1),
		consumer.AckWait(100*time.Millisecond), consumer.MaxAttempts(1)); err != nil {
		t.Fatalf("the smallest valid options: %v", err)
	}
}

func qaDeadLetter(t *testing.T, js jetstream.JetStream, q string) *jetstream.RawStreamMsg {
	t.Helper()
	ctx := testenv.Context(t, 15*time.Second)
	s, err := js.Stream(ctx, "WORKQ_"+q+"_DEAD")
	if err != nil {
		t.Fatal(err)
	}
	// The record says dead before the dead letter is published (a worker that dies
	// in between publishes it on redelivery): wait for it.
	var m *jetstream.RawStreamMsg
	testenv.Eventually(t, 10*time.Second, "the dead letter of queue "+q, func() bool {
		m, err = s.GetLastMsgForSubject(ctx, "workq."+q+".dead")
		return err == nil
	})
	return m
}

func TestBadInputUnknownKindGoesToDeadLetters(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "kinds")
	ctx := testenv.Context(t, 20*time.Second)
	known := make(chan string, 4)
	mux := consumer.NewMux()
	mux.RouteFunc("known", func(_ context.Context, j *consumer.Job) error {
		known <- j.ID()
		return nil
	})
	w := newWorker(t, js, "kinds", mux)
	runWorker(t, w)
	if _, err := p.Enqueue(ctx, []byte("keep-me"), producer.ID("u1"), producer.Kind("mystery_kind"), producer.Header("X-Trace", "t1")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("fine"), producer.ID("k1"), producer.Kind("known")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "u1 dead", func() bool { return status(t, p, "u1").State == producer.StateDead })
	testenv.Eventually(t, 10*time.Second, "k1 done", func() bool { return status(t, p, "k1").State == producer.StateDone })
	if id := <-known; id != "k1" {
		t.Fatalf("known handler got %s", id)
	}
	r := status(t, p, "u1")
	if !strings.Contains(r.LastError, "mystery_kind") || r.Kind != "mystery_kind" || r.Attempt != 1 || r.FinishedAt.IsZero() {
		t.Errorf("dead record: %+v", r)
	}
	m := qaDeadLetter(t, js, "kinds")
	if string(m.Data) != "keep-me" {
		t.Errorf("dead letter payload %q", m.Data)
	}
	for k, want := range map[string]string{
		"Workq-Job-Id": "u1", "Workq-Queue": "kinds", "Workq-Kind": "mystery_kind", "X-Trace": "t1",
		"Workq-Original-Subject": "workq.kinds.jobs.u1", "Workq-Attempts": "1",
	} {
		if got := m.Header.Get(k); got != want {
			t.Errorf("dead letter header %s = %q, want %q", k, got, want)
		}
	}
	if e := m.Header.Get("Workq-Error"); !strings.Contains(e, "mystery_kind") || !strings.Contains(e, "no handler") {
		t.Errorf("Workq-Error = %q; want it to name the kind", e)
	}
	if m.Header.Get("Workq-Original-Sequence") == "" || m.Header.Get("Workq-Dead-At") == "" {
		t.Errorf("dead letter headers %v", m.Header)
	}
	if n := qaStreamMsgs(t, js, "WORKQ_kinds_DEAD"); n != 1 {
		t.Errorf("%d dead letters, want 1", n)
	}
	testenv.Eventually(t, 5*time.Second, "jobs stream empty (dead job terminated)", func() bool { return qaStreamMsgs(t, js, "WORKQ_kinds") == 0 })
	wantOneDeadOneCommitted(t, w)
}

// wantOneDeadOneCommitted waits until w has counted one dead letter and one commit
// (a worker counts an outcome just after writing it to the record) and checks that
// it retried nothing.
func wantOneDeadOneCommitted(t *testing.T, w *consumer.Worker) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, "the outcomes counted", func() bool { s := w.Stats(); return s.Dead == 1 && s.Committed == 1 })
	if s := w.Stats(); s.Dead != 1 || s.Committed != 1 || s.Retried != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestBadInputMalformedJSONGoesToDeadLetters(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "json")
	ctx := testenv.Context(t, 20*time.Second)
	type order struct {
		N    int    `json:"n"`
		Name string `json:"name"`
	}
	got := make(chan order, 4)
	w := newWorker(t, js, "json", consumer.JSON(func(_ context.Context, j *consumer.Job, v order) error {
		got <- v
		return nil
	}))
	runWorker(t, w)
	bad := []byte(`{"n": 5, "name": `)
	if _, err := p.Enqueue(ctx, bad, producer.ID("bad")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte(`{"n": 7, "name": "x"}`), producer.ID("good")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "bad dead", func() bool { return status(t, p, "bad").State == producer.StateDead })
	testenv.Eventually(t, 10*time.Second, "good done", func() bool { return status(t, p, "good").State == producer.StateDone })
	if v := <-got; v != (order{7, "x"}) {
		t.Fatalf("decoded %+v", v)
	}
	if len(got) != 0 {
		t.Fatalf("handler called for the malformed job: %+v", <-got)
	}
	r := status(t, p, "bad")
	if !strings.Contains(r.LastError, "malformed") || r.Attempt != 1 {
		t.Errorf("dead record %+v", r)
	}
	m := qaDeadLetter(t, js, "json")
	if string(m.Data) != string(bad) {
		t.Errorf("dead letter payload %q, want %q", m.Data, bad)
	}
	if e := m.Header.Get("Workq-Error"); !strings.Contains(e, "malformed") {
		t.Errorf("Workq-Error = %q", e)
	}
	wantOneDeadOneCommitted(t, w)
}

func TestBadInputPlainPublishIsAJob(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "plain")
	ctx := testenv.Context(t, 20*time.Second)
	seen := make(chan [2]string, 8)
	w := newWorker(t, js, "plain", consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		seen <- [2]string{j.ID(), string(j.Payload())}
		return nil
	}))
	// No headers at all.
	a1, err := js.Publish(ctx, "workq.plain.jobs", []byte("no headers"))
	if err != nil {
		t.Fatal(err)
	}
	// Only a Nats-Msg-Id.
	m := nats.NewMsg("workq.plain.jobs")
	m.Header.Set("Nats-Msg-Id", "ext-42")
	m.Data = []byte("with id")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	// A Nats-Msg-Id that is no valid job id falls back to the sequence.
	m3 := nats.NewMsg("workq.plain.jobs")
	m3.Header.Set("Nats-Msg-Id", "has space")
	m3.Data = []byte("odd id")
	a3, err := js.PublishMsg(ctx, m3)
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	want := map[string]string{
		fmt.Sprintf("seq-%d", a1.Sequence): "no headers",
		"ext-42":                           "with id",
		fmt.Sprintf("seq-%d", a3.Sequence): "odd id",
	}
	for range want {
		select {
		case s := <-seen:
			if want[s[0]] != s[1] {
				t.Errorf("handler saw id %q payload %q; want one of %v", s[0], s[1], want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("plain jobs not delivered")
		}
	}
	for id := range want {
		// A plain publish has no per-job subject, so Status finds it only once its
		// record is written (at commit, for a fast first attempt).
		testenv.Eventually(t, 10*time.Second, id+" done", func() bool {
			r, err := p.Status(testenv.Context(t, 5*time.Second), id)
			return err == nil && r.State == producer.StateDone
		})
		if r := status(t, p, id); r.Attempt != 1 {
			t.Errorf("record %s: %+v", id, r)
		}
	}
	testenv.Eventually(t, 5*time.Second, "jobs stream empty", func() bool { return qaStreamMsgs(t, js, "WORKQ_plain") == 0 })
	// The worker counts a commit just after writing it to the record.
	testenv.Eventually(t, 5*time.Second, "the commits counted", func() bool { return w.Stats().Committed == 3 })
	if s := w.Stats(); s.Committed != 3 || s.Dead != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestBadInputAckWaitMismatchIsIncompatible(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	if _, err := consumer.New(ctx, js, "aw", qaNop, consumer.Logger(quiet), consumer.AckWait(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	w, err := consumer.New(ctx, js, "aw", qaNop, consumer.Logger(quiet), consumer.AckWait(20*time.Second))
	if !errors.Is(err, consumer.ErrIncompatible) || w != nil {
		t.Fatalf("second worker with another AckWait: %v, %v; want ErrIncompatible", w, err)
	}
	if !strings.Contains(err.Error(), "AckWait") {
		t.Errorf("error does not say AckWait: %v", err)
	}
	// Default AckWait (30s) differs too.
	if _, err := consumer.New(ctx, js, "aw", qaNop, consumer.Logger(quiet)); !errors.Is(err, consumer.ErrIncompatible) {
		t.Errorf("default AckWait against 10s: %v", err)
	}
	// The consumer was left as it was, and the same AckWait is fine.
	s, err := js.Stream(ctx, "WORKQ_aw")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Consumer(ctx, "workers")
	if err != nil {
		t.Fatal(err)
	}
	if aw := c.CachedInfo().Config.AckWait; aw != 10*time.Second {
		t.Fatalf("consumer AckWait now %s", aw)
	}
	if _, err := consumer.New(ctx, js, "aw", qaNop, consumer.Logger(quiet), consumer.AckWait(10*time.Second), consumer.Concurrency(3)); err != nil {
		t.Fatalf("same AckWait: %v", err)
	}
}

func TestBadInputNewWaitsForUnreachableServer(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	env.Stop()
	js := env.JetStream(t) // connects once the server is back
	w := testenv.WaitsForServer(t, func() {
		if err := env.Server.Restart(); err != nil {
			t.Fatal(err)
		}
	}, func(ctx context.Context) (*consumer.Worker, error) {
		return consumer.New(ctx, js, "late", qaNop, consumer.Logger(quiet))
	})
	// And it works.
	p := newProducer(t, js, "late")
	runWorker(t, w)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID("x")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "job done", func() bool { return status(t, p, "x").State == producer.StateDone })
}

// Every entry point given nil or out-of-range input returns a clear error (wrapping
// ErrInvalidOption for arguments and options), or does the documented thing (nil
// options and middleware are skipped; the zero Mux works; Exponential never returns
// a negative delay) — and never panics.
func TestBadInputNeverPanics(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	var nilCtx context.Context // a variable, as a caller's bug would pass it
	const q = "nopanic"
	w := newWorker(t, js, q, qaNop)
	newErr := func(ctx context.Context, js jetstream.JetStream, h consumer.Handler, opts ...consumer.Option) error {
		_, err := consumer.New(ctx, js, q, h, append([]consumer.Option{consumer.Logger(quiet)}, opts...)...)
		return err
	}
	tag := func(s string) consumer.Middleware {
		return func(next consumer.Handler) consumer.Handler {
			return consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
				if err := next.Handle(ctx, j); err != nil {
					return fmt.Errorf("%s(%w)", s, err)
				}
				return nil
			})
		}
	}
	fails := consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return errors.New("x") })
	// Nil or out-of-range arguments and options: refused with ErrInvalidOption.
	badinput.Run(t, consumer.ErrInvalidOption, []badinput.Case{
		{"New(nil ctx)", "nil context", func() error { return newErr(nilCtx, js, qaNop) }},
		{"New(nil JetStream)", "nil JetStream", func() error { return newErr(ctx, nil, qaNop) }},
		{"New(nil Handler)", "nil handler", func() error { return newErr(ctx, js, nil) }},
		{"New(nil HandlerFunc)", "nil handler", func() error { return newErr(ctx, js, consumer.HandlerFunc(nil)) }},
		{"New(nil Option) is skipped", "", func() error { return newErr(ctx, js, qaNop, nil, consumer.Concurrency(2), nil) }},
		{"New(Use(nil, nil)) is skipped", "", func() error { return newErr(ctx, js, qaNop, consumer.Use(nil, nil)) }},
		{"Heartbeat(5ms)", "Heartbeat(5ms): want at least 10ms", func() error { return newErr(ctx, js, qaNop, consumer.Heartbeat(5*time.Millisecond)) }},
		{"Heartbeat(-1s)", "want at least 10ms", func() error { return newErr(ctx, js, qaNop, consumer.Heartbeat(-time.Second)) }},
		{"Heartbeat(10ms)", "", func() error {
			return newErr(ctx, js, qaNop, consumer.Heartbeat(10*time.Millisecond))
		}},
		{"Run(nil ctx)", "nil context", func() error { return w.Run(nilCtx) }},
		{"Backoff(nil)", "Backoff(nil): want a function", func() error { return newErr(ctx, js, qaNop, consumer.Backoff(nil)) }},
		{"Exponential with bad bounds", "", func() error { return checkExponential() }},
	})
	// Nil handlers and middleware, and zero Muxes: skipped, or the documented error.
	badinput.Run(t, nil, []badinput.Case{
		{"Chain skips nil middleware", "a(b(x))", func() error {
			return consumer.Chain(fails, nil, tag("a"), nil, tag("b"), nil).Handle(ctx, &consumer.Job{})
		}},
		{"zero Mux without routes", "no handler for job kind", func() error {
			var m consumer.Mux
			return m.Handle(ctx, &consumer.Job{})
		}},
		{"zero Mux Route", "", func() error {
			var m consumer.Mux
			m.Route("", qaNop)
			return m.Handle(ctx, &consumer.Job{})
		}},
		{"zero Mux RouteFunc and Default", "x", func() error {
			var m consumer.Mux
			m.RouteFunc("other", func(context.Context, *consumer.Job) error { return nil })
			m.Default(fails)
			return m.Handle(ctx, &consumer.Job{})
		}},
		{"Mux RouteFunc(nil) removes the route", "no handler for job kind", func() error {
			m := consumer.NewMux()
			m.Route("", qaNop)
			m.RouteFunc("", nil)
			m.Default(consumer.HandlerFunc(nil))
			return m.Handle(ctx, &consumer.Job{})
		}},
	})
}

// checkExponential calls Exponential with bases and limits out of order, zero or
// negative, and attempts from below 1 to huge, and reports a delay below 0, above
// the documented bound, or a call that does not return within a second.
func checkExponential() error {
	const huge = time.Duration(1<<63 - 1)
	type bounds struct{ base, limit, want time.Duration } // want: the largest delay allowed
	for _, b := range []bounds{
		{-time.Second, time.Minute, 0}, {0, time.Minute, 0}, {-time.Second, -time.Minute, 0},
		{time.Second, time.Millisecond, time.Second}, {time.Second, 0, time.Second}, {time.Second, -time.Second, time.Second},
		{time.Second, huge, huge}, {1, huge, huge}, {huge, huge, huge}, {time.Second, 5 * time.Minute, 5 * time.Minute},
	} {
		f := consumer.Exponential(b.base, b.limit)
		for _, attempt := range []int{-1 << 62, -1, 0, 1, 2, 3, 30, 62, 63, 64, 100, 1 << 40, 1<<63 - 1} {
			got := make(chan time.Duration, 1)
			go func() { got <- f(attempt) }()
			select {
			case d := <-got:
				if d < 0 || d > b.want {
					return fmt.Errorf("Exponential(%s, %s)(%d) = %s, want 0 to %s", b.base, b.limit, attempt, d, b.want)
				}
			case <-time.After(time.Second):
				return fmt.Errorf("Exponential(%s, %s)(%d) did not return within 1s", b.base, b.limit, attempt)
			}
		}
	}
	if d := consumer.Constant(-time.Second)(1); d != 0 {
		return fmt.Errorf("Constant(-1s) = %s, want 0", d)
	}
	return nil
}

// A backoff that returns a negative delay retries at once, and the job record says
// so: its retry time is not in the past.
func TestBadInputNegativeBackoffRetriesAtOnce(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "negbackoff"
	p := newProducer(t, js, q)
	second := make(chan struct{})
	release := make(chan struct{})
	// Unfenced, so that the record still says retrying while the retry runs.
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if j.Attempt() == 1 {
			return errors.New("once")
		}
		close(second)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}), consumer.Unfenced(), consumer.Backoff(func(int) time.Duration { return -time.Hour }))
	runWorker(t, w)
	before := time.Now()
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID("n1")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the job was not retried")
	}
	r := status(t, p, "n1")
	close(release)
	if r.State != producer.StateRetrying || r.RetryAt.Before(before) || r.RetryAt.After(time.Now()) {
		t.Fatalf("record while retrying %+v: want retrying, retry at between %s and now", r, before.Format(time.RFC3339Nano))
	}
	testenv.Eventually(t, 10*time.Second, "the job to succeed", func() bool { return status(t, p, "n1").State == producer.StateDone })
}
