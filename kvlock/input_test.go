package kvlock

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/workq/workq/internal/badinput"
	"github.com/workq/workq/testenv"
)

func TestBadInput(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	l := newTestLocker(t, js)
	ctx := testenv.Context(t, 20*time.Second)

	//lint:ignore SA1012 nil context is the bad input under test
	if _, err := New(nil, js); !errors.Is(err, ErrInvalidOption) { //nolint:staticcheck
		t.Errorf("New(nil ctx): %v", err)
	}
	if _, err := New(ctx, nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("New(nil js): %v", err)
	}
	for _, o := range []Option{Bucket(""), Bucket("a.b"), Bucket("a b")} {
		if _, err := New(ctx, js, o); !errors.Is(err, ErrInvalidName) {
			t.Errorf("New with a bad bucket: %v, want ErrInvalidName", err)
		}
	}
	// Each bad option is refused with an error wrapping ErrInvalidOption that names
	// the option and its value.
	for _, c := range []struct {
		o    Option
		want string
	}{
		{Replicas(0), "Replicas(0): want 1 to 5"},
		{Replicas(-1), "Replicas(-1): want 1 to 5"},
		{Replicas(7), "Replicas(7): want 1 to 5"},
		{LockTTL(0), "LockTTL(0s): want at least MinTTL (50ms)"},
		{LockTTL(-time.Second), "LockTTL(-1s): want at least MinTTL"},
		{Logger(nil), "Logger(nil): want a logger"},
	} {
		if _, err := New(ctx, js, c.o); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v; want an ErrInvalidOption saying so", c.want, err)
		}
	}

	for _, name := range []string{"", strings.Repeat("x", MaxNameLen+1)} {
		if _, err := l.Acquire(ctx, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Acquire(%.10q…): %v, want ErrInvalidName", name, err)
		}
		if _, err := l.TryAcquire(ctx, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("TryAcquire(%.10q…): %v, want ErrInvalidName", name, err)
		}
		if err := l.Do(ctx, name, func(context.Context, uint64) error { return nil }); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Do(%.10q…): %v, want ErrInvalidName", name, err)
		}
		if _, err := l.Semaphore(name, 2); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Semaphore(%.10q…): %v, want ErrInvalidName", name, err)
		}
	}
	for _, d := range []time.Duration{0, -time.Second, MinTTL - 1} {
		want := "TTL(" + d.String() + "): want at least MinTTL"
		if _, err := l.Acquire(ctx, "x", TTL(d)); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), want) {
			t.Errorf("Acquire TTL %s: %v, want an ErrInvalidOption saying %q", d, err, want)
		}
		if _, err := l.TryAcquire(ctx, "x", TTL(d)); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), want) {
			t.Errorf("TryAcquire TTL %s: %v, want an ErrInvalidOption saying %q", d, err, want)
		}
	}
	for _, n := range []int{0, -1, MaxSemaphoreSize + 1} {
		if _, err := l.Semaphore("s", n); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("Semaphore size %d: %v, want ErrInvalidOption", n, err)
		}
	}
	if err := l.Do(ctx, "x", nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("Do(nil fn): %v", err)
	}
	// A nil context is refused by every call that takes one, without a panic.
	var nilCtx context.Context // a variable, as a caller's bug would pass it
	held, err := l.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	lim, err := l.Limiter(ctx, "lim", 10, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sem, err := l.Semaphore("sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, uint64) error { return nil }
	badinput.Run(t, ErrInvalidOption, []badinput.Case{
		{"New", "nil context", func() error { _, err := New(nilCtx, js); return err }},
		{"Acquire", "nil context", func() error { _, err := l.Acquire(nilCtx, "x"); return err }},
		{"TryAcquire", "nil context", func() error { _, err := l.TryAcquire(nilCtx, "x"); return err }},
		{"Do", "nil context", func() error { return l.Do(nilCtx, "x", noop) }},
		{"Release", "nil context", func() error { return held.Release(nilCtx) }},
		{"Inspect", "nil context", func() error { _, err := l.Inspect(nilCtx, "x"); return err }},
		{"ForceRelease", "nil context", func() error { _, err := l.ForceRelease(nilCtx, "x", 0); return err }},
		{"List", "nil context", func() error { _, err := l.List(nilCtx); return err }},
		{"BucketExists", "nil context", func() error { _, err := BucketExists(nilCtx, js, DefaultBucket); return err }},
		{"Limiter", "nil context", func() error { _, err := l.Limiter(nilCtx, "x", 1, time.Second); return err }},
		{"Limiter.Allow", "nil context", func() error { _, _, err := lim.Allow(nilCtx); return err }},
		{"Limiter.Wait", "nil context", func() error { return lim.Wait(nilCtx) }},
		{"Semaphore.Acquire", "nil context", func() error { _, err := sem.Acquire(nilCtx); return err }},
		{"Semaphore.TryAcquire", "nil context", func() error { _, err := sem.TryAcquire(nilCtx); return err }},
		{"Semaphore.Do", "nil context", func() error { return sem.Do(nilCtx, noop) }},
	})
	if _, err := BucketExists(ctx, nil, DefaultBucket); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("BucketExists(nil js): %v, want ErrInvalidOption", err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Acquire(cancelled, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with a cancelled context: %v", err)
	}
	if _, err := l.TryAcquire(cancelled, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("TryAcquire with a cancelled context: %v", err)
	}
	if _, err := New(cancelled, js); !errors.Is(err, context.Canceled) {
		t.Errorf("New with a cancelled context: %v", err)
	}
	if _, err := l.Limiter(cancelled, "lim", 1, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Limiter with a cancelled context: %v", err)
	}
	ran := false
	if err := l.Do(cancelled, "x", func(context.Context, uint64) error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
		t.Errorf("Do with a cancelled context: %v (ran %v)", err, ran)
	}
	lk, err := l.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Release(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Release with a cancelled context: %v", err)
	}
	if !lk.Held() {
		t.Error("Release with a cancelled context dropped the lock")
	}
	release(t, lk) // the lock is still held: a real Release works
	t.Logf("example errors: %v / %v", func() error { _, err := l.Acquire(ctx, ""); return err }(),
		func() error { _, err := l.Acquire(ctx, "x", TTL(time.Millisecond)); return err }())
}

// Any string is a valid lock name; names that differ map to different keys.
func TestNamesAnyString(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	l := newTestLocker(t, env.JetStream(t))
	ctx := testenv.Context(t, 20*time.Second)
	names := []string{"plain-Name_1", "user:42", "user_42", "s3://bucket/key", "a.b", "a b", "ünïcödé ✓",
		"*", ">", "=", "\x00\xff", strings.Repeat("long", MaxNameLen/4)}
	var held []*Lock
	keys := map[string]string{}
	for _, n := range names {
		lk, err := l.TryAcquire(ctx, n)
		if err != nil {
			t.Fatalf("TryAcquire(%q): %v", n, err)
		}
		if prev, dup := keys[lk.key]; dup {
			t.Fatalf("%q and %q share key %q", n, prev, lk.key)
		}
		keys[lk.key] = n
		held = append(held, lk)
	}
	for _, lk := range held {
		if _, err := l.TryAcquire(ctx, lk.Name()); !errors.Is(err, ErrLocked) {
			t.Fatalf("second TryAcquire(%q): %v", lk.Name(), err)
		}
		release(t, lk)
	}
	if k, _ := lockKey(kindLock, "plain-Name_1"); k != "plain-Name_1" {
		t.Errorf("plain name encoded as %q", k)
	}
}

// An existing bucket without limit markers is refused with a clear error.
func TestBucketWithoutLimitMarkers(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	if _, err := js.CreateKeyValue(ctx, jsKVConfig("PLAIN")); err != nil {
		t.Fatal(err)
	}
	_, err := New(ctx, js, Bucket("PLAIN"))
	if !errors.Is(err, ErrBucketConfig) {
		t.Fatalf("New on a bucket without limit markers: %v, want ErrBucketConfig", err)
	}
	t.Log(err)
}

// Do hands fn the token and a context that ends when the lock is lost; a loss while
// fn runs is reported as ErrLost.
func TestDoReportsLoss(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	l := newTestLocker(t, env.JetStream(t))
	w := newTestLocker(t, env.JetStream(t))
	ctx := testenv.Context(t, 20*time.Second)
	const lease = 200 * time.Millisecond
	var token uint64
	var held *Lock
	l.onGranted = func(lk *Lock) { held = lk }
	err := l.Do(ctx, "doomed", func(fctx context.Context, tok uint64) error {
		token = tok
		held.paused.Store(true) // the holder freezes: its lease runs out
		select {
		case <-fctx.Done():
			if !errors.Is(context.Cause(fctx), ErrLost) {
				t.Errorf("fn context cause %v, want ErrLost", context.Cause(fctx))
			}
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("fn context did not end when the lock was lost")
		}
	}, TTL(lease))
	l.onGranted = nil
	if !errors.Is(err, ErrLost) {
		t.Fatalf("Do after a loss: %v, want ErrLost", err)
	}
	if token == 0 {
		t.Fatal("fn got no token")
	}
	// A plain Do returns fn's error and releases.
	boom := errors.New("boom")
	if err := l.Do(ctx, "plain", func(context.Context, uint64) error { return boom }); !errors.Is(err, boom) || errors.Is(err, ErrLost) {
		t.Fatalf("Do returning an error: %v", err)
	}
	lk, err := w.TryAcquire(ctx, "plain")
	if err != nil {
		t.Fatalf("Do did not release: %v", err)
	}
	release(t, lk)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	reg := prometheus.NewRegistry()
	a := newTestLocker(t, env.JetStream(t), Metrics(reg))
	b := newTestLocker(t, env.JetStream(t), Metrics(reg)) // shares the collectors
	ctx := testenv.Context(t, 20*time.Second)
	lk, err := a.Acquire(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, "m"); !errors.Is(err, ErrLocked) {
		t.Fatal(err)
	}
	lim, err := b.Limiter(ctx, "m", 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lim.Allow(ctx) //nolint:errcheck
	lim.Allow(ctx) //nolint:errcheck
	got := gather(t, reg)
	for name, want := range map[string]float64{
		"workq_locks_held":                            1,
		"workq_lock_contention_total":                 1,
		"workq_limiter_decisions_total{allowed}":      1,
		"workq_limiter_decisions_total{rejected}":     1,
		"workq_lock_acquire_wait_seconds_count{lock}": 1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], want, got)
		}
	}
	release(t, lk)
	if got := gather(t, reg); got["workq_locks_held"] != 0 {
		t.Errorf("held after release: %v", got["workq_locks_held"])
	}
}

// A lost lock is counted in workq_locks_lost_total with its reason and logged as
// "kvlock: lock lost": once because its holder was cut off from the server past its
// lease while a waiter took over (expired), once because its key was deleted
// behind its back (taken_over).
func TestLostLockMetricAndLog(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	proxy := testenv.StartProxy(t, env.URL())
	js := proxy.JetStream(t)
	a := newTestLocker(t, js, Metrics(reg), Logger(logger), Owner("a"))
	b := newTestLocker(t, env.JetStream(t), Metrics(reg), Logger(logger), Owner("b"))
	ctx := testenv.Context(t, 30*time.Second)
	const lease = 300 * time.Millisecond

	// Expired: a's link stalls past its lease while b waits and takes over.
	lk, err := a.Acquire(ctx, "cut-off", TTL(lease))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lock, 1)
	go func() {
		lk2, err := b.Acquire(ctx, "cut-off", TTL(lease))
		if err != nil {
			t.Error(err)
		}
		got <- lk2
	}()
	waitForWatchers(t, b, 1)
	waitForRenewals(t, b.kv, lk, 1)
	proxy.Pause()
	if !closedWithin(lk.Lost(), 5*time.Second) {
		t.Fatal("cut-off holder's Lost did not fire")
	}
	var lk2 *Lock
	select {
	case lk2 = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not take over from the cut-off holder")
	}
	proxy.Resume()
	if lk2 == nil {
		return
	}
	checkLost(t, reg, logs, map[string]float64{"expired": 1, "taken_over": 0})
	checkLostLog(t, logs, "cut-off", lk.Token(), "expired")

	// Taken over: the key is deleted behind the new holder's back; its next renewal
	// finds another write on the key.
	if err := b.kv.Delete(ctx, lk2.key); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(lk2.Lost(), 5*time.Second) {
		t.Fatal("holder whose key was deleted: Lost did not fire")
	}
	checkLost(t, reg, logs, map[string]float64{"expired": 1, "taken_over": 1})
	checkLostLog(t, logs, "cut-off", lk2.Token(), "taken_over")
	if got := gather(t, reg)["workq_locks_held"]; got != 0 {
		t.Errorf("workq_locks_held %v after both locks were lost", got)
	}
}

// Without the Logger option a Locker logs to slog.Default() as New finds it, as a
// consumer does: here a lock lost because its key was deleted behind its back.
// Not parallel: it replaces the process-wide default logger while it runs (parallel
// tests wait until the serial ones are done, so none of them logs into it).
func TestLoggerDefaultsToSlogDefault(t *testing.T) {
	logs := &logBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	env := testenv.Start(t)
	l := newTestLocker(t, env.JetStream(t))
	ctx := testenv.Context(t, 30*time.Second)
	lk, err := l.Acquire(ctx, "default-logger", TTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.kv.Delete(ctx, lk.key); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(lk.Lost(), 5*time.Second) {
		t.Fatal("holder whose key was deleted: Lost did not fire")
	}
	checkLostLog(t, logs, "default-logger", lk.Token(), "taken_over")
}

// checkLost checks workq_locks_lost_total{kind="lock",reason} for each reason.
func checkLost(t *testing.T, reg *prometheus.Registry, logs *logBuffer, want map[string]float64) {
	t.Helper()
	got := gather(t, reg)
	for reason, n := range want {
		if name := "workq_locks_lost_total{lock," + reason + "}"; got[name] != n {
			t.Errorf("%s = %v, want %v (all: %v)\nlogs:\n%s", name, got[name], n, got, logs)
		}
	}
}

// checkLostLog checks that one "kvlock: lock lost" line was logged, at Warn, for the
// lock's name and token, with reason.
func checkLostLog(t *testing.T, logs *logBuffer, name string, token uint64, reason string) {
	t.Helper()
	n := 0
	for _, rec := range logs.records(t) {
		if rec["msg"] != "kvlock: lock lost" || rec["token"] != float64(token) {
			continue
		}
		n++
		detail, _ := rec["detail"].(string)
		if rec["level"] != "WARN" || rec["name"] != name || rec["kind"] != kindLock ||
			rec["reason"] != reason || rec["bucket"] != DefaultBucket || detail == "" {
			t.Errorf("lock lost line %v, want level WARN, name %q, kind lock, reason %q, bucket and detail", rec, name, reason)
		}
	}
	if n != 1 {
		t.Errorf("%d \"kvlock: lock lost\" lines for token %d, want 1; logs:\n%s", n, token, logs)
	}
}
