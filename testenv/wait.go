package testenv

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Context returns a context that ends after d or when the test ends.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Eventually checks cond every 10ms until it holds, failing the test if it does not
// within d. what names the condition in the failure.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitsForServer checks how a constructor behaves while the server is down: called
// with a context of 300ms, it gives up when the context ends, with the context's
// error; called again with a long context, it waits — it has not returned 200ms
// later — and succeeds once start has brought the server up. It returns what the
// second call returned.
func WaitsForServer[T any](t testing.TB, start func(), newFn func(ctx context.Context) (T, error)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	began := time.Now()
	_, err := newFn(ctx)
	cancel()
	if took := time.Since(began); err == nil || !errors.Is(err, context.DeadlineExceeded) || took > 5*time.Second {
		t.Fatalf("with the server down: returned after %s with %v; want the context's deadline error after about 300ms", took, err)
	}

	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := newFn(Context(t, 30*time.Second))
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("returned with the server down: %v", r.err)
	case <-time.After(200 * time.Millisecond): // it must still be waiting
	}
	start()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("once the server was up: %v", r.err)
		}
		return r.v
	case <-time.After(30 * time.Second):
		t.Fatal("did not return after the server came up")
	}
	panic("unreachable")
}
