package kvlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// releaseTimeout bounds the Release that Do and Semaphore.Do run after fn, on a
// context detached from the caller's (which may have ended).
const releaseTimeout = 5 * time.Second

// Do acquires the lock called name (waiting as Acquire does), runs fn with a context
// that ends when ctx ends or the lock is lost, and the lock's fencing token, then
// releases the lock — also when fn panics. It returns fn's error; if the lock was
// lost while fn ran, the error also wraps ErrLost, because fn's work was not
// protected to the end. This is the "pool of locks keyed by object id" use: call it
// with the object's id as the name.
func (l *Locker) Do(ctx context.Context, name string, fn func(ctx context.Context, token uint64) error, opts ...AcquireOption) error {
	if fn == nil {
		return fmt.Errorf("kvlock: do lock %q: nil function: %w", name, ErrInvalidOption)
	}
	lk, err := l.Acquire(ctx, name, opts...)
	if err != nil {
		return err
	}
	return runLocked(ctx, lk, fn)
}

func runLocked(ctx context.Context, lk *Lock, fn func(ctx context.Context, token uint64) error) (err error) {
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(lk.Context(), func() { cancel(context.Cause(lk.Context())) })
	defer func() {
		stop()
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer rcancel()
		rerr := lk.Release(rctx)
		switch {
		case errors.Is(rerr, ErrNotHeld):
			err = errors.Join(err, fmt.Errorf("kvlock: do %s %q (token %d): %w while the function ran",
				lk.kind, lk.name, lk.token, ErrLost))
		case rerr != nil:
			err = errors.Join(err, rerr)
		}
	}()
	return fn(fctx, lk.Token())
}
