// Package attempt carries, from a worker to whoever started it, what became of each
// run of a handler: committed, to be retried after some delay, dead, reassigned,
// handed back, or left unsettled by a failed write. The worker reports from its own
// path, after the outcome is written to the job record and before the delivery is
// released (ack, nak or term), so an observer reads the record the outcome wrote.
//
// The observer travels in the context given to consumer.Worker.Run, as
// net/http/httptrace's hooks do in a request's: package consumertest uses it to
// report a handler's outcome as the worker settled it, and the consumer's public API
// stays as it is.
package attempt

import (
	"context"
	"time"
)

// Outcome is what a worker did with a run of a handler.
type Outcome int

// The outcomes a worker reports.
const (
	// Committed: the handler returned nil; the record says done, with the result.
	Committed Outcome = iota + 1
	// Retrying: the run failed; the record says retrying, and the job is put back to
	// run again after Delay.
	Retrying
	// Dead: the job failed for good (a permanent error, the last attempt, a job that
	// could not be run); the record says dead and its dead letter is published.
	Dead
	// Reassigned: another delivery claimed the job; nothing was committed or acked.
	Reassigned
	// HandedBack: the worker stopped and cut the run short; the job is put back, the
	// attempt not counted.
	HandedBack
	// Cancelled: the job was cancelled; the run (if any) was stopped, nothing was
	// committed, and the job will not run again.
	Cancelled
	// Unsettled: the outcome could not be written (a claim, a record write or a dead
	// letter failed); the job is redelivered later. Err says why.
	Unsettled
)

// Report is one run's outcome.
type Report struct {
	JobID   string
	Outcome Outcome
	Attempt int
	// Err is the error the worker acted on: the handler's, as wrapped by the worker
	// (ErrExhausted on the last attempt), a panic's (ErrPanic), or the write that
	// failed (Unsettled). Nil when committed.
	Err error
	// Delay is how long until a Retrying job runs again.
	Delay time.Duration
	// Panicked says the handler panicked; PanicValue is what it panicked with and
	// Stack the goroutine's stack at the panic.
	Panicked   bool
	PanicValue any
	Stack      []byte
}

// Observer receives the reports of a worker's runs. It is called on the worker's
// goroutines, one run at a time per job; the delivery waits for it to return.
type Observer func(Report)

type key struct{}

// WithObserver returns ctx carrying f, for consumer.Worker.Run.
func WithObserver(ctx context.Context, f Observer) context.Context {
	return context.WithValue(ctx, key{}, f)
}

// ObserverOf returns the Observer ctx carries, or nil.
func ObserverOf(ctx context.Context) Observer {
	f, _ := ctx.Value(key{}).(Observer)
	return f
}
