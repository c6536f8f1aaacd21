package consumertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/attempt"
)

// once guards Work's promise of one attempt against a retry that reaches the worker
// before it stops: the second run never reaches the handler, and ends when the
// worker cancels it.
func TestOnceRunsTheHandlerOnce(t *testing.T) {
	t.Parallel()
	calls := 0
	var ran atomic.Bool
	h := once(consumer.HandlerFunc(func(context.Context, *consumer.Job) error { calls++; return nil }), &ran)
	if err := h.Handle(context.Background(), nil); err != nil || calls != 1 {
		t.Fatalf("first run: %v, %d calls", err, calls)
	}
	stopped := errors.New("worker stopped")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Handle(ctx, nil) }()
	select {
	case err := <-done:
		t.Fatalf("second run returned %v before its context ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel(stopped)
	if err := <-done; !errors.Is(err, stopped) || calls != 1 {
		t.Fatalf("second run: %v, %d calls; want the context's cause and still 1 call", err, calls)
	}
}

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	for o, want := range map[attempt.Outcome]Outcome{
		attempt.Committed: Committed, attempt.Retrying: Retrying, attempt.Dead: Dead, attempt.Reassigned: Reassigned, attempt.Cancelled: Cancelled,
	} {
		if got, err := outcomeOf(attempt.Report{Outcome: o}); got != want || err != nil {
			t.Errorf("outcome %d: %q, %v; want %q", o, got, err, want)
		}
	}
	writeFailed := errors.New("record write failed")
	for _, r := range []attempt.Report{{Outcome: attempt.HandedBack}, {Outcome: attempt.Unsettled, Err: writeFailed}} {
		if got, err := outcomeOf(r); got != "" || err == nil {
			t.Errorf("outcome %d: %q, %v; want an error", r.Outcome, got, err)
		}
	}
	if _, err := outcomeOf(attempt.Report{Outcome: attempt.Unsettled, Err: writeFailed}); !errors.Is(err, writeFailed) {
		t.Errorf("unsettled: %v does not wrap the write's error", err)
	}
}
