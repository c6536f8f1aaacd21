package consumer

import (
	"context"
	"fmt"
	"runtime/debug"
)

// Handler runs one job. Returning nil commits the job; see the package doc for
// errors. ctx ends when the job's ownership is lost (cause ErrStale), its Timeout
// passes, or the worker stops and the drain timeout passes.
type Handler interface {
	Handle(ctx context.Context, j *Job) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, j *Job) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, j *Job) error { return f(ctx, j) }

// isNilFunc reports whether h is a nil HandlerFunc, which is not a nil Handler.
func isNilFunc(h Handler) bool {
	f, ok := h.(HandlerFunc)
	return ok && f == nil
}

// Middleware wraps a Handler, for logging, tracing, metrics or rate limits.
type Middleware func(Handler) Handler

// Chain wraps h in mw, the first given outermost. Nil middleware is skipped.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		if mw[i] != nil {
			h = mw[i](h)
		}
	}
	return h
}

// safeCall runs h, turning a panic into an error that carries the stack.
func safeCall(ctx context.Context, h Handler, j *Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return h.Handle(ctx, j)
}

// panicError is a handler's panic as an error: ErrPanic, with what the handler
// panicked with and its stack kept apart, so that a report of the run can carry them
// as they were (see observe.go).
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("%s: %v\n%s", ErrPanic, e.value, e.stack) }
func (e *panicError) Unwrap() error { return ErrPanic }
