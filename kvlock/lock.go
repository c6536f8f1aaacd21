package kvlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/retry"
)

// Lock is a granted lock or semaphore slot. It is renewed in the background until
// Release, or until it is lost. Its methods are safe for concurrent use.
//
// A Lock is a lease, not a guarantee: a holder that is paused longer than its lease
// (GC, swap, SIGSTOP, a slow disk) can still be running after Lost fired and a new
// holder was granted. Where correctness matters, pass Token to the protected
// resource and have it reject tokens lower than the highest it has seen.
type Lock struct {
	l     *Locker
	kind  string
	name  string
	key   string
	token uint64
	lease time.Duration
	rec   record
	data  []byte

	ctx    context.Context // ends on loss or release
	cancel context.CancelCauseFunc
	lost   chan struct{}

	stopCtx  context.Context // ends when Release starts; stops renewals
	stopKeep context.CancelFunc
	done     chan struct{} // closed when the keepalive goroutine has returned

	paused  atomic.Bool // test hook: stop renewing, as a frozen process would
	noRenew bool        // a fixed lease (NoRenew)

	mu         sync.Mutex
	rev        uint64    // the last revision this holder wrote
	validUntil time.Time // when this holder stops trusting its lease (monotonic)
	state      lockState
	// releaseFailed: Release stopped renewals but could not delete the key; a
	// second Release tries again.
	releaseFailed bool
	releaseMu     sync.Mutex // serialises Release calls
}

type lockState int

const (
	stateHeld lockState = iota
	stateLost
	stateReleased
)

// guardFraction is the part of the lease a holder trusts after its last successful
// write was sent: it gives up at 90%, a waiter takes over after 100% counted from
// when it saw that write, so a holder acting on Lost has at least a tenth of the
// lease (plus network delay) to stop before anyone else is granted the lock.
const guardFraction = 0.9

func newLock(l *Locker, tg *target, slot int, token, rev uint64, rec record, data []byte, sent time.Time) *Lock {
	lease := rec.lease()
	ctx, cancel := context.WithCancelCause(context.Background())
	stopCtx, stopKeep := context.WithCancel(context.Background())
	return &Lock{
		l:          l,
		kind:       tg.kind,
		name:       tg.name,
		key:        tg.keys[slot],
		token:      token,
		lease:      lease,
		rec:        rec,
		data:       data,
		ctx:        ctx,
		cancel:     cancel,
		lost:       make(chan struct{}),
		stopCtx:    stopCtx,
		stopKeep:   stopKeep,
		done:       make(chan struct{}),
		rev:        rev,
		validUntil: sent.Add(trusted(lease)),
	}
}

func trusted(lease time.Duration) time.Duration {
	return time.Duration(float64(lease) * guardFraction)
}

// Name is the lock's or semaphore's name.
func (lk *Lock) Name() string { return lk.name }

// Token is the lock's fencing token: the KV revision (stream sequence) at which this
// grant was written. Tokens of successive grants of the same name — and of any
// name in the same bucket — strictly increase, including across releases, expiries,
// takeovers and server restarts, as long as the bucket's stream is not deleted and
// recreated (its sequence would start again).
func (lk *Lock) Token() uint64 { return lk.token }

// TTL is the lock's lease.
func (lk *Lock) TTL() time.Duration { return lk.lease }

// Lost is closed when the lock is lost: it could not be renewed within its lease
// (on this process's own clock), or another holder superseded it. It is not closed
// by Release; Context ends in both cases.
func (lk *Lock) Lost() <-chan struct{} { return lk.lost }

// Context ends when the lock is lost (cause wraps ErrLost) or released (cause
// ErrReleased); use context.Cause to tell. Run the protected work under it.
func (lk *Lock) Context() context.Context { return lk.ctx }

// Held reports whether this process still trusts the lock, checking its own clock
// now rather than waiting for the keepalive to notice.
func (lk *Lock) Held() bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.state == stateHeld && now().Before(lk.validUntil)
}

// Release releases the lock: a compare-and-delete on this holder's last revision,
// so it never removes another holder's lock. It returns an error wrapping
// ErrNotHeld if the lock was lost (its lease ran out or it was taken over) or
// already released. With a context that has already ended it does nothing. If the
// server is unreachable, Release retries until ctx ends and returns the error;
// renewals have stopped by then, so the lock expires after its lease, and calling
// Release again retries the delete.
func (lk *Lock) Release(ctx context.Context) error {
	if ctx == nil {
		return lk.errorf(option.Nil("context"))
	}
	if err := ctx.Err(); err != nil {
		return lk.errorf(err) // nothing done: the lock is still held and renewed
	}
	lk.releaseMu.Lock()
	defer lk.releaseMu.Unlock()

	lk.mu.Lock()
	st, again := lk.state, lk.releaseFailed
	lk.mu.Unlock()
	if st == stateReleased && !again {
		return lk.errorf(fmt.Errorf("already released: %w", ErrNotHeld))
	}
	lk.stopKeep()
	<-lk.done // the keepalive owns lk.rev until it returns

	lk.mu.Lock()
	rev, st := lk.rev, lk.state
	lk.mu.Unlock()

	if st == stateLost {
		// Nobody may have taken it yet: free it for them if it is still ours, with
		// one attempt, and report that it was not held.
		lk.mu.Lock()
		lk.state = stateReleased
		lk.mu.Unlock()
		_, _ = lk.deleteIfMine(ctx, rev)
		return lk.errorf(fmt.Errorf("lease ran out or was taken over before release: %w", ErrNotHeld))
	}
	var released bool
	err := retry.Do(ctx, func(ctx context.Context) error {
		var err error
		released, err = lk.deleteIfMine(ctx, rev)
		return err
	})
	lk.finish(stateReleased, ErrReleased)
	lk.mu.Lock()
	lk.releaseFailed = err != nil
	lk.mu.Unlock()
	switch {
	case err != nil:
		// Renewals have stopped, so the lock expires after its lease anyway;
		// calling Release again retries the delete.
		return lk.errorf(err)
	case !released:
		return lk.errorf(fmt.Errorf("taken over by another holder: %w", ErrNotHeld))
	}
	return nil
}

// deleteIfMine purges the key if its value is still this grant's, whatever its
// revision (a renewal whose reply was lost may have landed).
func (lk *Lock) deleteIfMine(ctx context.Context, rev uint64) (bool, error) {
	for range 3 {
		markerRev, err := lk.l.purge(ctx, lk.key, rev, lk.rec.ID)
		if err == nil {
			lk.l.freeRevs.put(lk.key, markerRev)
			return true, nil
		}
		if !jserr.IsConflict(err) {
			return false, err
		}
		st, err := lk.l.read(ctx, lk.key)
		if err != nil {
			return false, err
		}
		if st.free && st.releasedBy == lk.rec.ID {
			// This release's own purge, whose reply was lost: a try sent again meets
			// its marker (a new bucket electing its leader lost one in a CI run).
			lk.l.freeRevs.put(lk.key, st.rev)
			return true, nil
		}
		if st.free || !st.recOK || st.rec.ID != lk.rec.ID || st.rev <= rev {
			return false, nil
		}
		rev = st.rev
	}
	return false, nil
}

// finish moves a held lock to lost or released once, ending its context.
func (lk *Lock) finish(to lockState, cause error) bool {
	return lk.finishWith(to, cause, nil)
}

// finishWith is finish that runs before, once the transition is decided but before
// Lost and Context tell anyone, so what it records is visible to whoever they wake.
func (lk *Lock) finishWith(to lockState, cause error, before func()) bool {
	lk.mu.Lock()
	if lk.state != stateHeld {
		lk.mu.Unlock()
		return false
	}
	lk.state = to
	lk.mu.Unlock()
	lk.l.metrics.held.WithLabelValues(lk.kind).Dec()
	if before != nil {
		before()
	}
	if to == stateLost {
		close(lk.lost)
	}
	lk.cancel(cause)
	return true
}

func (lk *Lock) errorf(err error) error {
	return fmt.Errorf("kvlock: release %s %q (token %d): %w", lk.kind, lk.name, lk.token, err)
}

// lose marks the lock lost for reason (reasonExpired or reasonTakenOver).
func (lk *Lock) lose(reason string, detail error) {
	cause := fmt.Errorf("%s %q (token %d): %w: %v", lk.kind, lk.name, lk.token, ErrLost, detail)
	lk.finishWith(stateLost, cause, func() {
		lk.l.metrics.lost.WithLabelValues(lk.kind, reason).Inc()
		lk.l.log.Warn("kvlock: lock lost", "kind", lk.kind, "name", lk.name, "token", lk.token,
			"reason", reason, "detail", detail.Error())
	})
}

var (
	errLeaseRanOut = errors.New("not renewed within the lease")
	errSuperseded  = errors.New("another holder wrote the key")
)
