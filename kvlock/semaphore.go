package kvlock

import (
	"context"
	"fmt"
)

// MaxSemaphoreSize bounds a semaphore's number of holders: each is a key that every
// waiter watches.
const MaxSemaphoreSize = 1024

// Semaphore admits up to n holders of one name at a time, across processes. Each
// holder gets one of n slots — a lock of its own, with the same waiting, lease,
// renewal, fencing token and release semantics as a Lock. Every process using a
// semaphore name must use the same n (it is not stored on the server). A semaphore
// and a lock of the same name are independent.
type Semaphore struct {
	l  *Locker
	tg *target
}

// Semaphore returns the semaphore called name (any string, as for locks) with n
// slots, 1 ≤ n ≤ MaxSemaphoreSize. It does not talk to the server.
func (l *Locker) Semaphore(name string, n int) (*Semaphore, error) {
	key, err := lockKey(kindSemaphore, name)
	if err != nil {
		return nil, fmt.Errorf("kvlock: semaphore: %w", err)
	}
	if n < 1 || n > MaxSemaphoreSize {
		return nil, fmt.Errorf("kvlock: semaphore %q: size %d: want 1 to %d: %w", name, n, MaxSemaphoreSize, ErrInvalidOption)
	}
	tg := &target{kind: kindSemaphore, name: name, filter: key + ".*"}
	for i := range n {
		tg.keys = append(tg.keys, slotKey(key, i))
	}
	return &Semaphore{l: l, tg: tg}, nil
}

// Name is the semaphore's name.
func (s *Semaphore) Name() string { return s.tg.name }

// Size is the semaphore's number of slots.
func (s *Semaphore) Size() int { return len(s.tg.keys) }

// Acquire takes a slot, waiting as Locker.Acquire does until one is free or ctx ends.
func (s *Semaphore) Acquire(ctx context.Context, opts ...AcquireOption) (*Lock, error) {
	ac, err := s.l.acquireConfig(opts)
	if err != nil {
		return nil, s.tg.errorf("acquire", err)
	}
	return s.l.acquire(ctx, "acquire", s.tg, ac, true)
}

// TryAcquire takes a free slot or returns at once with an error wrapping ErrLocked
// (a *LockedError naming the holders).
func (s *Semaphore) TryAcquire(ctx context.Context, opts ...AcquireOption) (*Lock, error) {
	ac, err := s.l.acquireConfig(opts)
	if err != nil {
		return nil, s.tg.errorf("try-acquire", err)
	}
	return s.l.acquire(ctx, "try-acquire", s.tg, ac, false)
}

// Do takes a slot, runs fn as Locker.Do does, and releases the slot.
func (s *Semaphore) Do(ctx context.Context, fn func(ctx context.Context, token uint64) error, opts ...AcquireOption) error {
	if fn == nil {
		return fmt.Errorf("kvlock: do semaphore %q: nil function: %w", s.tg.name, ErrInvalidOption)
	}
	lk, err := s.Acquire(ctx, opts...)
	if err != nil {
		return err
	}
	return runLocked(ctx, lk, fn)
}
