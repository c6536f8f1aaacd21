package consumertest_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// fakeT stands in for a *testing.T where there is none (an example) or where a test
// checks that a helper fails its test: it records failures instead of failing, ends
// the helper's goroutine on Fatal as testing does, runs cleanups when the helper is
// done, and drops logs. The methods it does not define are testing.TB's, nil: none
// is called by the helpers.
type fakeT struct {
	testing.TB
	mu       sync.Mutex
	failures []string
	cleanups []func()
}

func (f *fakeT) Helper()                   {}
func (f *fakeT) Context() context.Context  { return context.Background() }
func (f *fakeT) Log(...any)                {}
func (f *fakeT) Logf(string, ...any)       {}
func (f *fakeT) Error(args ...any)         { f.fail(fmt.Sprint(args...)) }
func (f *fakeT) Errorf(s string, a ...any) { f.fail(fmt.Sprintf(s, a...)) }
func (f *fakeT) Fatal(args ...any)         { f.fail(fmt.Sprint(args...)); runtime.Goexit() }
func (f *fakeT) Fatalf(s string, a ...any) { f.fail(fmt.Sprintf(s, a...)); runtime.Goexit() }
func (f *fakeT) Cleanup(fn func())         { f.mu.Lock(); f.cleanups = append(f.cleanups, fn); f.mu.Unlock() }
func (f *fakeT) fail(msg string)           { f.mu.Lock(); f.failures = append(f.failures, msg); f.mu.Unlock() }

// run calls fn with a fakeT on a goroutine of its own, so that a Fatal ends fn and
// not the caller, then runs the cleanups fn registered, last first, and returns the
// failures.
func run(fn func(t testing.TB)) []string {
	f := &fakeT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	return f.failures
}

// test runs an example's test body, printing its failures (which the example's
// output check then reports).
func test(body func(t testing.TB)) {
	for _, msg := range run(body) {
		fmt.Println("FAIL:", msg)
	}
}
