package consumertest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/consumertest"
	"github.com/workq/workq/producer"
)

func TestWorkCommitted(t *testing.T) {
	t.Parallel()
	var seen string
	res := consumertest.Work(t, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		seen = strings.Join([]string{j.ID(), j.Kind(), j.Header().Get("Tenant"), string(j.Payload())}, "|")
		j.SetResult([]byte("sent"))
		return nil
	}), []byte("ada@example.com"), consumertest.ID("mail-1"), consumertest.Kind("send_email"), consumertest.Header("Tenant", "acme"))

	if seen != "mail-1|send_email|acme|ada@example.com" {
		t.Errorf("the handler saw %q", seen)
	}
	r := res.Record
	if res.Outcome != consumertest.Committed || res.Err != nil || res.Attempt != 1 || res.Panic != nil {
		t.Fatalf("result: %+v", res)
	}
	if r.State != producer.StateDone || string(r.Result) != "sent" || r.ID != "mail-1" || r.Queue != consumertest.Queue ||
		r.Kind != "send_email" || r.Attempt != 1 || r.Worker.Name != "consumertest" || r.FinishedAt.IsZero() {
		t.Fatalf("record: %+v", r)
	}
}

// The outcome is what the worker did, not what the handler returned: a nil with a
// result too large to store is dead.
func TestWorkReportsTheWorkersOutcome(t *testing.T) {
	t.Parallel()
	res := consumertest.Work(t, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		j.SetResult(make([]byte, 2<<20))
		return nil
	}), nil)
	if res.Outcome != consumertest.Dead || !consumer.IsPermanent(res.Err) || !strings.Contains(res.Err.Error(), "result too large") ||
		res.Record.State != producer.StateDead {
		t.Fatalf("handler returned nil with a 2 MiB result: %s, %v, record %s", res.Outcome, res.Err, res.Record.State)
	}
}

var errRateLimited = errors.New("rate limited")

func TestWorkRetrying(t *testing.T) {
	t.Parallel()
	t.Run("RetryAfter", func(t *testing.T) {
		t.Parallel()
		before := time.Now()
		res := consumertest.Work(t, consumer.HandlerFunc(func(context.Context, *consumer.Job) error {
			return consumer.RetryAfter(42*time.Second, errRateLimited)
		}), nil)
		r := res.Record
		if res.Outcome != consumertest.Retrying || res.Delay != 42*time.Second || !errors.Is(res.Err, errRateLimited) {
			t.Fatalf("result: %+v", res)
		}
		if r.State != producer.StateRetrying || r.Attempt != 1 || !strings.Contains(r.LastError, "rate limited") ||
			r.RetryAt.Before(before.Add(42*time.Second)) || r.RetryAt.After(time.Now().Add(42*time.Second)) {
			t.Fatalf("record: %+v", r)
		}
	})
	t.Run("backoff", func(t *testing.T) {
		t.Parallel()
		var asked atomic.Int64
		res := consumertest.Work(t, consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return errRateLimited }), nil,
			consumertest.Attempt(2),
			consumertest.WorkerOptions(consumer.Backoff(func(attempt int) time.Duration {
				asked.Store(int64(attempt))
				return time.Duration(attempt) * time.Minute
			})))
		if res.Outcome != consumertest.Retrying || res.Delay != 2*time.Minute || asked.Load() != 2 || !errors.Is(res.Err, errRateLimited) {
			t.Fatalf("result: %+v (backoff asked for attempt %d)", res, asked.Load())
		}
	})
}

func TestWorkDead(t *testing.T) {
	t.Parallel()
	t.Run("Permanent", func(t *testing.T) {
		t.Parallel()
		bad := errors.New("bad address")
		res := consumertest.Work(t, consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return consumer.Permanent(bad) }), nil)
		if res.Outcome != consumertest.Dead || !errors.Is(res.Err, bad) || !consumer.IsPermanent(res.Err) ||
			res.Record.State != producer.StateDead || res.Record.Attempt != 1 {
			t.Fatalf("result: %+v", res)
		}
	})
	t.Run("last attempt", func(t *testing.T) {
		t.Parallel()
		var attempt int
		res := consumertest.Work(t, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
			attempt = j.Attempt()
			return errRateLimited
		}), nil, consumertest.Attempt(3), consumertest.MaxAttempts(3))
		r := res.Record
		if res.Outcome != consumertest.Dead || !errors.Is(res.Err, consumer.ErrExhausted) || !errors.Is(res.Err, errRateLimited) ||
			attempt != 3 || res.Attempt != 3 {
			t.Fatalf("result: %+v (the handler saw attempt %d)", res, attempt)
		}
		if r.State != producer.StateDead || r.Attempt != 3 || r.MaxAttempts != 3 {
			t.Fatalf("record: %+v", r)
		}
	})
	t.Run("unknown kind", func(t *testing.T) {
		t.Parallel()
		res := consumertest.Work(t, consumer.NewMux(), nil, consumertest.Kind("transcode"))
		if res.Outcome != consumertest.Dead || !errors.Is(res.Err, consumer.ErrUnknownKind) {
			t.Fatalf("result: %+v", res)
		}
	})
}

func TestWorkPanic(t *testing.T) {
	t.Parallel()
	boom := func(context.Context, *consumer.Job) error { panic("boom") }
	res := consumertest.Work(t, consumer.HandlerFunc(boom), nil)
	if res.Outcome != consumertest.Retrying || res.Panic != "boom" || !errors.Is(res.Err, consumer.ErrPanic) ||
		!strings.Contains(res.Stack, "TestWorkPanic") || !strings.Contains(res.Record.LastError, "handler panicked: boom") {
		t.Fatalf("result: %+v", res)
	}
	// On the last attempt, a panic is the end.
	res = consumertest.Work(t, consumer.HandlerFunc(boom), nil, consumertest.MaxAttempts(1))
	if res.Outcome != consumertest.Dead || res.Panic != "boom" || !errors.Is(res.Err, consumer.ErrExhausted) {
		t.Fatalf("result on the last attempt: %+v", res)
	}
}

func TestWorkUnfenced(t *testing.T) {
	t.Parallel()
	res := consumertest.Work(t, consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }), nil,
		consumertest.WorkerOptions(consumer.Unfenced()))
	if res.Outcome != consumertest.Committed || res.Record.State != "" {
		t.Fatalf("result: %+v (an unfenced first attempt writes no record)", res)
	}
	res = consumertest.Work(t, consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return errRateLimited }), nil,
		consumertest.WorkerOptions(consumer.Unfenced(), consumer.Backoff(consumer.Constant(time.Hour))))
	if res.Outcome != consumertest.Retrying || res.Delay != time.Hour || res.Record.State != producer.StateRetrying {
		t.Fatalf("result: %+v", res)
	}
}

type greet struct {
	Name string `json:"name"`
}

func (greet) Kind() string { return "greet" }

func TestWorkArgs(t *testing.T) {
	t.Parallel()
	mux := consumer.NewMux()
	if err := consumer.RouteArgs(mux, func(_ context.Context, j *consumer.Job, g greet) error {
		j.SetResult([]byte("hello " + g.Name))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if res := consumertest.WorkArgs(t, mux, greet{Name: "Ada"}); res.Outcome != consumertest.Committed || string(res.Record.Result) != "hello Ada" {
		t.Fatalf("result: %+v", res)
	}
	// A payload of the right kind that does not decode.
	res := consumertest.Work(t, mux, []byte(`{"name":7}`), consumertest.Kind("greet"))
	if res.Outcome != consumertest.Dead || !errors.Is(res.Err, consumer.ErrMalformed) {
		t.Fatalf("malformed: %+v", res)
	}
}

// Work runs one attempt: a retry due at once does not run the handler again.
func TestWorkRunsOneAttempt(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	t.Run("work", func(t *testing.T) { // returns once the worker has stopped (its cleanup)
		res := consumertest.Work(t, consumer.HandlerFunc(func(context.Context, *consumer.Job) error {
			runs.Add(1)
			return consumer.RetryAfter(0, errRateLimited)
		}), nil)
		if res.Outcome != consumertest.Retrying || res.Delay != 0 {
			t.Fatalf("result: %+v", res)
		}
	})
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
}

func TestWorkFailsTheTest(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		h    consumer.Handler
		opts []consumertest.Option
		says string
	}{
		"a handler that does not return in time": {
			consumer.HandlerFunc(func(ctx context.Context, _ *consumer.Job) error { <-ctx.Done(); return ctx.Err() }),
			[]consumertest.Option{consumertest.Timeout(300 * time.Millisecond)},
			"was not settled within 300ms (Timeout option); the handler was cut short: the worker stopped before the handler returned",
		},
		"an attempt past the limit": {
			consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }),
			[]consumertest.Option{consumertest.Attempt(4), consumertest.MaxAttempts(3)},
			"Attempt(4) is past MaxAttempts(3)",
		},
		"a handler that commits only after the Timeout": {
			consumer.HandlerFunc(func(context.Context, *consumer.Job) error { time.Sleep(time.Second); return nil }),
			[]consumertest.Option{consumertest.Timeout(300 * time.Millisecond)},
			"was not settled within 300ms (Timeout option); the worker settled it committed only after that",
		},
		"an attempt past the worker's limit": {
			consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }),
			[]consumertest.Option{consumertest.Attempt(4), consumertest.WorkerOptions(consumer.MaxAttempts(3))},
			"without running the handler",
		},
		"a nil handler": {nil, nil, "nil handler"},
		"an invalid job id": {
			consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }),
			[]consumertest.Option{consumertest.ID("a\nb")},
			"job id",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			failures := run(func(ft testing.TB) { consumertest.Work(ft, c.h, nil, c.opts...) })
			if len(failures) != 1 || !strings.Contains(failures[0], c.says) {
				t.Fatalf("failures %q, want one saying %q", failures, c.says)
			}
		})
	}
}

// Work's worker stops at once when the test ends: it does not let its open pull run
// out (up to a second at the default AckWait), which made a suite of handler tests
// cost a second a test (issue 25). What is left is the server's shutdown.
func TestWorkStopsAtOnce(t *testing.T) {
	t.Parallel()
	var returned time.Time
	t.Run("work", func(t *testing.T) {
		consumertest.Work(t, consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }), nil)
		returned = time.Now()
	})
	// The pull opened as the worker started, a few milliseconds before the outcome:
	// left to expire, it would hold the stop for most of a second.
	if took := time.Since(returned); took > 600*time.Millisecond {
		t.Fatalf("the test's clean-up took %s after Work returned", took)
	}
}
