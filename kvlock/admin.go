package kvlock

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/retry"
)

// Entry is a held lock or semaphore slot as the bucket stores it, for operators'
// tools (workq lock ls). It is a snapshot: the holder may renew, release or lose it
// the moment after it was read.
type Entry struct {
	Name   string // the lock's or semaphore's name, decoded from its key
	Kind   string // "lock" or "semaphore"
	Slot   int    // the semaphore slot; -1 for a lock
	Key    string // the KV key
	Holder Holder // who holds it; Holder.Revision is the value's current revision
}

// List returns every lock and semaphore slot held in the bucket, sorted by name and
// slot. Free keys (released, expired) are left out.
func (l *Locker) List(ctx context.Context) ([]Entry, error) {
	if ctx == nil {
		return nil, fmt.Errorf("kvlock: list: %w", option.Nil("context"))
	}
	var out []Entry
	err := retry.Do(ctx, func(ctx context.Context) error {
		out = out[:0]
		w, err := l.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
		if err != nil {
			return err
		}
		defer func() { _ = w.Stop() }()
		for {
			var e jetstream.KeyValueEntry
			select {
			case e = <-w.Updates():
			case <-ctx.Done():
				return ctx.Err()
			}
			if e == nil { // the initial values are all delivered
				return nil
			}
			st := stateOfEntry(e)
			if st.free || !st.recOK {
				continue
			}
			name, kind, slot, ok := decodeKey(e.Key())
			if !ok {
				continue // not a kvlock key
			}
			out = append(out, Entry{Name: name, Kind: kind, Slot: slot, Key: e.Key(), Holder: st.rec.holder(st.rev)})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("kvlock: list bucket %q: %w", l.cfg.bucket, err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Slot < out[j].Slot
	})
	return out, nil
}

// Inspect returns the holder of the lock called name, or nil if it is free.
func (l *Locker) Inspect(ctx context.Context, name string) (*Holder, error) {
	if ctx == nil {
		return nil, fmt.Errorf("kvlock: inspect lock %q: %w", name, option.Nil("context"))
	}
	key, err := lockKey(kindLock, name)
	if err != nil {
		return nil, fmt.Errorf("kvlock: inspect lock: %w", err)
	}
	st, err := l.readRetrying(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("kvlock: inspect lock %q: %w", name, err)
	}
	if st.free || !st.recOK {
		return nil, nil
	}
	h := st.rec.holder(st.rev)
	return &h, nil
}

// ForceRelease frees the lock called name on behalf of its holder, whoever that is —
// an operator's tool, and the release of a lock taken with NoRenew by a process that
// has since exited (workq lock acquire / release). If revision is not 0 the lock is
// released only if its value is still at that revision (for a NoRenew lock, its
// token), so a release never frees a later grant. It is a compare-and-delete: a
// holder that renews in between keeps its lock. It returns the holder it released,
// or an error wrapping ErrNotHeld if the lock was free or held at another revision.
// A live holder whose lock is force-released learns it on its next renewal (Lost).
func (l *Locker) ForceRelease(ctx context.Context, name string, revision uint64) (Holder, error) {
	errorf := func(err error) error { return fmt.Errorf("kvlock: force-release lock %q: %w", name, err) }
	if ctx == nil {
		return Holder{}, errorf(option.Nil("context"))
	}
	key, err := lockKey(kindLock, name)
	if err != nil {
		return Holder{}, fmt.Errorf("kvlock: force-release lock: %w", err)
	}
	st, err := l.readRetrying(ctx, key)
	if err != nil {
		return Holder{}, errorf(err)
	}
	if st.free || !st.recOK {
		return Holder{}, errorf(fmt.Errorf("the lock is free: %w", ErrNotHeld))
	}
	h := st.rec.holder(st.rev)
	if revision != 0 && st.rev != revision {
		return h, errorf(fmt.Errorf("held at revision %d, not %d, by %s: %w", st.rev, revision, h, ErrNotHeld))
	}
	err = retry.Do(ctx, func(ctx context.Context) error {
		_, err := l.purge(ctx, key, st.rev, "")
		return err
	})
	if jserr.IsConflict(err) {
		return h, errorf(fmt.Errorf("changed while releasing (renewed or released by its holder): %w", ErrNotHeld))
	}
	if err != nil {
		return h, errorf(err)
	}
	l.freeRevs.drop(key)
	return h, nil
}

// readRetrying reads key, riding out a brief unavailability of the server (a
// leader election, a reconnect) until ctx ends.
func (l *Locker) readRetrying(ctx context.Context, key string) (slotState, error) {
	var st slotState
	err := retry.Do(ctx, func(ctx context.Context) error {
		var err error
		st, err = l.read(ctx, key)
		return err
	})
	return st, err
}

// decodeKey maps a bucket key back to the name, kind and slot it was made from.
func decodeKey(key string) (name, kind string, slot int, ok bool) {
	base, slotStr, isSlot := strings.Cut(key, ".")
	kind, slot = kindLock, -1
	if isSlot {
		n, err := strconv.Atoi(slotStr)
		if err != nil || n < 0 {
			return "", "", 0, false
		}
		kind, slot = kindSemaphore, n
	}
	if enc, found := strings.CutPrefix(base, "="); found {
		b, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil {
			return "", "", 0, false
		}
		return string(b), kind, slot, true
	}
	for i := 0; i < len(base); i++ {
		if !plainByte(base[i]) {
			return "", "", 0, false
		}
	}
	return base, kind, slot, base != ""
}

// BucketExists reports whether the lock bucket called bucket exists, without
// creating it (New creates it), so read-only tools can say "no locks" instead.
func BucketExists(ctx context.Context, js jetstream.JetStream, bucket string) (bool, error) {
	switch {
	case ctx == nil:
		return false, fmt.Errorf("kvlock: bucket %q exists: %w", bucket, option.Nil("context"))
	case js == nil:
		return false, fmt.Errorf("kvlock: bucket %q exists: %w", bucket, option.Nil("JetStream"))
	}
	var found bool
	err := retry.Do(ctx, func(ctx context.Context) error {
		_, err := js.KeyValue(ctx, bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			found = false
			return nil
		}
		found = err == nil
		return err
	})
	return found, err
}
