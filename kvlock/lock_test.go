package kvlock

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/workq/workq/testenv"
)

func TestAcquireTryAcquireRelease(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	a := newTestLocker(t, env.JetStream(t), Owner("alice"))
	b := newTestLocker(t, env.JetStream(t), Owner("bob"))
	ctx := testenv.Context(t, 20*time.Second)

	lk, err := a.Acquire(ctx, "invoice-42", TTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if lk.Token() == 0 || lk.Name() != "invoice-42" || lk.TTL() != 2*time.Second || !lk.Held() {
		t.Fatalf("lock: token %d name %q ttl %s held %v", lk.Token(), lk.Name(), lk.TTL(), lk.Held())
	}

	// The value says who holds it.
	e, err := a.kv.Get(ctx, "invoice-42")
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		t.Fatalf("value %q: %v", e.Value(), err)
	}
	for _, k := range []string{"owner", "host", "pid", "acquired", "lease_ms"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("value %s lacks %q", e.Value(), k)
		}
	}

	_, err = b.TryAcquire(ctx, "invoice-42")
	var le *LockedError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &le) {
		t.Fatalf("TryAcquire on a held lock: %v, want ErrLocked", err)
	}
	if len(le.Holders) != 1 || le.Holders[0].Owner != "alice" || le.Holders[0].PID != os.Getpid() ||
		le.Holders[0].Lease != 2*time.Second {
		t.Fatalf("holders %+v, want alice pid %d lease 2s", le.Holders, os.Getpid())
	}
	t.Logf("TryAcquire error: %v", err)

	// Another name is independent.
	other, err := b.TryAcquire(ctx, "invoice-43")
	if err != nil {
		t.Fatal(err)
	}
	release(t, other)

	release(t, lk)
	if err := lk.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second Release: %v, want ErrNotHeld", err)
	}
	if lk.Held() || isClosed(lk.Lost()) || !errors.Is(context.Cause(lk.Context()), ErrReleased) {
		t.Fatalf("after release: held %v lost %v cause %v", lk.Held(), isClosed(lk.Lost()), context.Cause(lk.Context()))
	}

	lk2, err := b.TryAcquire(ctx, "invoice-42")
	if err != nil {
		t.Fatalf("TryAcquire after release: %v", err)
	}
	if lk2.Token() <= lk.Token() {
		t.Fatalf("token %d after %d: not increasing", lk2.Token(), lk.Token())
	}
	release(t, lk2)
	// Re-acquiring in the same process over its own release marker.
	lk3, err := b.TryAcquire(ctx, "invoice-42")
	if err != nil || lk3.Token() <= lk2.Token() {
		t.Fatalf("third grant: %v token %d after %d", err, lk3.Token(), lk2.Token())
	}
	release(t, lk3)
}

// The GET_LOCK(name, timeout) shape: the context's deadline bounds the wait.
func TestAcquireTimeout(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	a := newTestLocker(t, env.JetStream(t))
	b := newTestLocker(t, env.JetStream(t))
	ctx := testenv.Context(t, 20*time.Second)
	lk, err := a.Acquire(ctx, "report", TTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, lk)

	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = b.Acquire(wctx, "report")
	waited := time.Since(start)
	if !errors.Is(err, ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with timeout: %v, want ErrLocked and DeadlineExceeded", err)
	}
	if waited < 250*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("waited %s for a 300ms timeout", waited)
	}
	if !lk.Held() {
		t.Fatal("holder lost its lock while another timed out")
	}
}

func TestAcquireWaitsForRelease(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	a := newTestLocker(t, env.JetStream(t))
	b := newTestLocker(t, env.JetStream(t))
	ctx := testenv.Context(t, 20*time.Second)
	lk, err := a.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lock, 1)
	errc := make(chan error, 1)
	go func() {
		lk2, err := b.Acquire(ctx, "job")
		if err != nil {
			errc <- err
			return
		}
		got <- lk2
	}()
	select {
	case lk2 := <-got:
		t.Fatalf("waiter got token %d while the lock was held", lk2.Token())
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(300 * time.Millisecond): // the waiter must still be waiting
	}
	released := time.Now()
	release(t, lk)
	select {
	case lk2 := <-got:
		t.Logf("handoff after %s", time.Since(released))
		if lk2.Token() <= lk.Token() {
			t.Fatalf("token %d after %d", lk2.Token(), lk.Token())
		}
		// The waiter's grant says when it was granted, not when it asked (issue 25).
		if h, err := b.Inspect(ctx, "job"); err != nil || h.Acquired.Before(released) {
			t.Fatalf("holder %+v, %v: acquired before the lock was released at %s", h, err, released.Format(time.RFC3339Nano))
		}
		release(t, lk2)
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by the release")
	}
}
