package kvlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/retry"
)

// Acquire takes the lock called name, waiting until it is free or ctx ends; the
// context's deadline is the wait's timeout (as GET_LOCK's). Waiting watches the key,
// so a release or an expiry wakes a waiter at once, without polling; a holder that
// stopped renewing is superseded about one lease after this waiter saw its last
// renewal. When ctx ends first, the error wraps ErrLocked (a *LockedError naming the
// holder) and ctx's error. The lock is renewed automatically until Release.
// Waiters are not served in arrival order. Locks are not re-entrant: a second
// Acquire of a name this process holds waits for the first to be released.
func (l *Locker) Acquire(ctx context.Context, name string, opts ...AcquireOption) (*Lock, error) {
	tg, err := newLockTarget(name)
	if err != nil {
		return nil, fmt.Errorf("kvlock: acquire lock: %w", err)
	}
	ac, err := l.acquireConfig(opts)
	if err != nil {
		return nil, tg.errorf("acquire", err)
	}
	return l.acquire(ctx, "acquire", tg, ac, true)
}

// TryAcquire takes the lock called name if it is free and returns at once
// otherwise, with an error wrapping ErrLocked (a *LockedError naming the holder).
// It never supersedes a silent holder (only a waiter that watched it can tell); the
// server's TTL removes an abandoned lock about one lease, rounded up to whole
// seconds, after its last renewal.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts ...AcquireOption) (*Lock, error) {
	tg, err := newLockTarget(name)
	if err != nil {
		return nil, fmt.Errorf("kvlock: try-acquire lock: %w", err)
	}
	ac, err := l.acquireConfig(opts)
	if err != nil {
		return nil, tg.errorf("try-acquire", err)
	}
	return l.acquire(ctx, "try-acquire", tg, ac, false)
}

func (l *Locker) acquireConfig(opts []AcquireOption) (acquireConfig, error) {
	ac := acquireConfig{ttl: l.cfg.defaultTTL}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&ac); err != nil {
			return ac, err
		}
	}
	return ac, nil
}

func (l *Locker) acquire(ctx context.Context, op string, tg *target, ac acquireConfig, wait bool) (*Lock, error) {
	if ctx == nil {
		return nil, tg.errorf(op, option.Nil("context"))
	}
	if err := ctx.Err(); err != nil {
		return nil, tg.errorf(op, err)
	}
	start := now()
	states := make([]slotState, len(tg.keys))
	g, err := l.newGrant(ac)
	if err != nil {
		return nil, tg.errorf(op, err)
	}

	if !wait {
		// TryAcquire does not wait for the lock, but rides out a brief unavailability
		// (a new replicated bucket, a leader election) for up to attemptTimeout.
		tctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		var lk *Lock
		err := retry.Do(tctx, func(actx context.Context) error {
			var err error
			lk, err = l.tryClaim(actx, tg, g, states, false)
			return err
		})
		switch {
		case lk != nil:
			l.granted(lk, start, false)
			return lk, nil
		case errors.Is(err, errContended):
			l.metrics.contention.WithLabelValues(tg.kind).Inc()
			return nil, &LockedError{Op: op, Kind: tg.kind, Name: tg.name, Holders: holders(states)}
		}
		return nil, tg.errorf(op, err)
	}

	lk, err := l.tryClaim(ctx, tg, g, states, true)
	if lk != nil {
		l.granted(lk, start, false)
		return lk, nil
	}
	if !errors.Is(err, errContended) && !jserr.Transient(err) {
		return nil, tg.errorf(op, err)
	}
	l.metrics.contention.WithLabelValues(tg.kind).Inc()
	return l.wait(ctx, op, tg, ac, g, states, start)
}

// errContended: every slot tried is held by someone else.
var errContended = errors.New("contended")

// tryClaim makes the quick attempts that need no watch. First one compare-and-set,
// expecting the key to be absent or to hold the release marker this process last
// wrote on it; on conflict it reads the key (every slot for TryAcquire on a
// semaphore; Acquire on a semaphore goes straight to the watch, whose first delivery
// reads every slot at once) and claims a slot that is free. It fills states with what
// it read.
func (l *Locker) tryClaim(ctx context.Context, tg *target, g *grant, states []slotState, wait bool) (*Lock, error) {
	n := len(tg.keys)
	first := 0
	if n > 1 {
		first = rand.IntN(n)
	}
	lk, err := l.claim(ctx, tg, first, l.freeRevs.get(tg.keys[first]), g)
	if err == nil {
		return lk, nil
	}
	l.freeRevs.drop(tg.keys[first])
	if !jserr.IsConflict(err) {
		return nil, err
	}
	if wait && n > 1 {
		return nil, errContended
	}
	for i := range n {
		s := (first + i) % n
		st, err := l.readSlot(ctx, tg, s)
		if err != nil {
			return nil, err
		}
		states[s] = st
		if st.free || g.mine(st) {
			lk, err := l.claimState(ctx, tg, s, st, g)
			if err == nil {
				return lk, nil
			}
			if !jserr.IsConflict(err) {
				return nil, err
			}
			states[s].tried = true
		}
	}
	return nil, errContended
}

// attemptTimeout bounds each request of Acquire and TryAcquire, so that a request
// lost in a reconnect is retried (a publish made while disconnected may never get
// its reply) rather than waited on until the caller's deadline.
const attemptTimeout = 2 * time.Second

// readSlot reads slot s with attemptTimeout.
func (l *Locker) readSlot(ctx context.Context, tg *target, s int) (slotState, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	return l.read(ctx, tg.keys[s])
}

func (l *Locker) granted(lk *Lock, start time.Time, waited bool) {
	if waited {
		l.metrics.acquireWait.WithLabelValues(lk.kind).Observe(now().Sub(start).Seconds())
	} else {
		l.metrics.acquireWait.WithLabelValues(lk.kind).Observe(0)
	}
	l.metrics.held.WithLabelValues(lk.kind).Inc()
	if l.onGranted != nil {
		l.onGranted(lk)
	}
	go lk.keepalive()
}
