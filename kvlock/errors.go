package kvlock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/workq/workq/internal/naming"
	"github.com/workq/workq/internal/option"
)

// Sentinel errors. Every error returned by this package wraps one of these (or a
// context error, or the JetStream error that caused it), so callers test with
// errors.Is; messages name the operation and the lock, semaphore or limiter.
var (
	// ErrLocked means the lock (or every slot of the semaphore) is held by someone
	// else: TryAcquire returns it at once, Acquire when its context ends first (then
	// the error also wraps the context's error). The error is a *LockedError naming
	// the holders.
	ErrLocked = errors.New("locked by another holder")

	// ErrNotHeld is returned by Release when the lock is no longer this holder's:
	// its lease ran out, another holder took it over, or it was already released.
	// Release never removes another holder's lock.
	ErrNotHeld = errors.New("lock not held")

	// ErrLost is the cause of a lock's Context ending because the lock was lost:
	// it could not be renewed within its lease, or another holder superseded it. Do
	// returns an error wrapping ErrLost when the lock was lost while fn ran.
	ErrLost = errors.New("lock lost")

	// ErrReleased is the cause of a lock's Context ending because Release was called.
	ErrReleased = errors.New("lock released")

	// ErrInvalidName rejects an empty or over-long lock or semaphore name, and a
	// limiter name outside [A-Za-z0-9_-]. It is the same value as the one used by
	// the rest of workq for queue names.
	ErrInvalidName = naming.ErrInvalid

	// ErrInvalidOption rejects an option given a value it does not take (the error
	// names the option, the value and what it wants: a TTL below MinTTL, Replicas(9),
	// a nil Logger), and a nil or out-of-range argument: a semaphore size, rate or
	// window, a nil context, JetStream or function. The same value as
	// producer.ErrInvalidOption and consumer.ErrInvalidOption.
	ErrInvalidOption = option.ErrInvalid

	// ErrBucketConfig means the lock bucket exists with a configuration the locks
	// cannot work with (no limit markers, so no per-key TTL).
	ErrBucketConfig = errors.New("incompatible lock bucket")

	// ErrLimiterConfig means a limiter of that name exists with a different rate or
	// window: every process using a name must agree on them.
	ErrLimiterConfig = errors.New("incompatible limiter")
)

// Holder describes who holds a lock, as recorded in the lock's value when it was
// granted. Clocks are the holder's: Acquired is informative, never used for expiry.
type Holder struct {
	Owner    string        // the Owner label of the holder's Locker
	Host     string        // the holder's host name
	PID      int           // the holder's process id
	Acquired time.Time     // when the holder was granted the lock, by its own clock
	Lease    time.Duration // the lease the holder renews; it is lost if not renewed within it
	Revision uint64        // the KV revision of the value read (it changes on every renewal)
}

func (h Holder) String() string {
	return fmt.Sprintf("%s (host %s, pid %d, since %s, lease %s)",
		h.Owner, h.Host, h.PID, h.Acquired.Format(time.RFC3339Nano), h.Lease)
}

// LockedError is the error returned when a lock or semaphore is held by others.
// errors.Is(err, ErrLocked) is true for it.
type LockedError struct {
	Op      string   // "try-acquire" or "acquire"
	Kind    string   // "lock" or "semaphore"
	Name    string   // the lock or semaphore name
	Holders []Holder // the holders seen, when known
	cause   error    // the context error when Acquire gave up, else nil
}

func (e *LockedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kvlock: %s %s %q: %v", e.Op, e.Kind, e.Name, ErrLocked)
	for i, h := range e.Holders {
		if i == 0 {
			b.WriteString(" by ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(h.String())
	}
	if e.cause != nil {
		fmt.Fprintf(&b, ": %v", e.cause)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrLocked) true, and errors.Is(err,
// context.DeadlineExceeded) true when Acquire timed out.
func (e *LockedError) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrLocked, e.cause}
	}
	return []error{ErrLocked}
}
