package kvlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/retry"
)

// How a lock is granted. Every grant is a compare-and-set write on a key's last
// revision, so the server decides atomically between competitors:
//
//   - the key has no message, or a delete/purge/expiry marker: the lock is free and
//     the write expects that revision (or none);
//   - the key holds a value: the lock is held. A waiter watches the key; any change
//     (renewal, release, server expiry) reaches it at once through the watch. If the
//     value stays the same revision for the whole lease recorded in it, measured on
//     the waiter's own monotonic clock from when the waiter first saw that revision,
//     its holder has stopped renewing, and the waiter takes over by writing with
//     that revision expected. The holder itself considers the lock lost once it has
//     not renewed for 90% of the lease since it sent its last successful write, so
//     it gives up before any waiter can take over, without synchronised clocks.

// target is what a caller competes for: the key of a lock, or the n slot keys of a
// semaphore.
type target struct {
	kind   string
	name   string
	keys   []string
	filter string // watch filter covering every key
}

func newLockTarget(name string) (*target, error) {
	key, err := lockKey(kindLock, name)
	if err != nil {
		return nil, err
	}
	return &target{kind: kindLock, name: name, keys: []string{key}, filter: key}, nil
}

// slot maps a watched key to its slot index, or -1.
func (tg *target) slot(key string) int {
	if len(tg.keys) == 1 {
		if key == tg.keys[0] {
			return 0
		}
		return -1
	}
	dot := strings.LastIndexByte(key, '.')
	if dot < 0 {
		return -1
	}
	i, err := strconv.Atoi(key[dot+1:])
	if err != nil || i < 0 || i >= len(tg.keys) || tg.keys[i] != key {
		return -1
	}
	return i
}

func (tg *target) errorf(op string, err error) error {
	return fmt.Errorf("kvlock: %s %s %q: %w", op, tg.kind, tg.name, err)
}

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
		return nil, tg.errorf(op, fmt.Errorf("nil context: %w", ErrInvalidArgument))
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

// grant is one Acquire call's record. Its id stays the same across the call's
// attempts, so a write whose reply was lost (a timeout, a reconnect) is recognised
// when it is read back, and adopted instead of being left to expire.
type grant struct {
	rec     record
	data    []byte
	ttl     time.Duration
	noRenew bool
}

func (l *Locker) newGrant(ac acquireConfig) (*grant, error) {
	rec := record{
		Owner:    l.cfg.owner,
		Host:     l.host,
		PID:      l.pid,
		Acquired: time.Now().UTC(),
		LeaseMS:  ac.ttl.Milliseconds(),
		ID:       newID(),
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	return &grant{rec: rec, data: data, ttl: serverTTL(rec.lease()), noRenew: ac.noRenew}, nil
}

// mine reports whether st is a value written by this grant.
func (g *grant) mine(st slotState) bool {
	return st.known && !st.free && st.recOK && st.rec.ID == g.rec.ID
}

// claim writes the grant on slot s of tg, expecting revision expect, and returns
// the running Lock. If the slot already holds this grant's own value (an earlier
// write whose reply was lost), expect is that value's revision: the write renews
// it, which proves nobody else held the slot since, and the lock's token is the
// revision of that first write.
func (l *Locker) claim(ctx context.Context, tg *target, s int, expect uint64, g *grant) (*Lock, error) {
	return l.claimState(ctx, tg, s, slotState{rev: expect}, g)
}

func (l *Locker) claimState(ctx context.Context, tg *target, s int, st slotState, g *grant) (*Lock, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	sent := now()
	rev, err := l.write(ctx, tg.keys[s], g.data, st.rev, g.ttl)
	if err != nil {
		return nil, err
	}
	token := rev
	if g.mine(st) {
		token = st.rev
	}
	lk := newLock(l, tg, s, token, rev, g.rec, g.data, sent)
	lk.noRenew = g.noRenew
	return lk, nil
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

// errWatchEnded means the watch subscription closed under us (connection closed,
// consumer lost); the wait starts a new one.
var errWatchEnded = errors.New("watch ended")

// wait watches tg's keys until a slot is claimed or ctx ends. Watches that fail
// because the server is unreachable are re-established with a capped backoff.
func (l *Locker) wait(ctx context.Context, op string, tg *target, ac acquireConfig, g *grant, states []slotState, start time.Time) (*Lock, error) {
	delay := 10 * time.Millisecond
	var lastErr error
	for {
		lk, err := l.watchRound(ctx, tg, ac, g, states)
		if lk != nil {
			l.granted(lk, start, true)
			return lk, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			hs := holders(states)
			if len(hs) == 0 && lastErr != nil {
				return nil, tg.errorf(op, errors.Join(ctxErr, lastErr))
			}
			return nil, &LockedError{Op: op, Kind: tg.kind, Name: tg.name, Holders: hs, cause: ctxErr}
		}
		if !jserr.Transient(err) && !errors.Is(err, errWatchEnded) {
			return nil, tg.errorf(op, err)
		}
		lastErr = err
		l.log.Debug("kvlock: waiting for the server", "kind", tg.kind, "name", tg.name, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

// watchRound runs one watch of tg's keys. It returns a granted lock, or the error
// that ended the watch (ctx's error when ctx ended).
func (l *Locker) watchRound(ctx context.Context, tg *target, ac acquireConfig, g *grant, states []slotState) (*Lock, error) {
	wctx, cancel := context.WithCancel(ctx) // also ends the watch's subscription
	defer cancel()
	w, err := l.watch(wctx, cancel, tg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()

	seen := make([]bool, len(states))
	initDone := false
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errWatchEnded
			}
			if e == nil {
				// The watch delivered the last message of every key that has one;
				// a key it did not deliver has no message at all.
				initDone = true
				for i := range states {
					if !seen[i] {
						states[i] = slotState{known: true, free: true, observed: now()}
					}
				}
			} else if s := tg.slot(e.Key()); s >= 0 {
				seen[s] = true
				observe(&states[s], stateOfEntry(e))
			}
		case <-timer.C:
		}
		if !initDone {
			continue
		}
		lk, err := l.act(ctx, tg, ac, g, states)
		if lk != nil || err != nil {
			return lk, err
		}
		if next, ok := nextTakeover(states, ac); ok {
			timer.Reset(max(time.Until(next), 0))
		} else {
			timer.Stop()
		}
	}
}

// watch starts a watch of tg's keys that lives until ctx ends. The watch's
// subscription is tied to ctx, so its creation cannot carry a shorter deadline: it is
// bounded by attemptTimeout here instead, cancelling ctx when it runs over.
func (l *Locker) watch(ctx context.Context, cancel context.CancelFunc, tg *target) (jetstream.KeyWatcher, error) {
	type result struct {
		w   jetstream.KeyWatcher
		err error
	}
	ch := make(chan result, 1)
	go func() {
		w, err := l.kv.WatchFiltered(ctx, []string{tg.filter})
		ch <- result{w, err}
	}()
	t := time.NewTimer(attemptTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.w, r.err
	case <-t.C:
		cancel()
		if r := <-ch; r.w != nil {
			_ = r.w.Stop()
		}
		return nil, fmt.Errorf("start watch: no reply within %s: %w", attemptTimeout, errWatchEnded)
	}
}

// observe merges a new observation of a slot into what is known, keeping the
// earliest time a revision was seen and ignoring stale (older) reads.
func observe(cur *slotState, ns slotState) {
	if cur.known && ns.rev == cur.rev && ns.free == cur.free {
		return
	}
	if cur.known && ns.rev < cur.rev && ns.rev != 0 {
		return
	}
	*cur = ns
}

// lease is how long a slot's value may stay unchanged before a waiter may take it
// over: the lease its holder recorded, or ours for a value we cannot read.
func (st *slotState) lease(ac acquireConfig) time.Duration {
	if st.recOK {
		return st.rec.lease()
	}
	return ac.ttl
}

func nextTakeover(states []slotState, ac acquireConfig) (time.Time, bool) {
	var next time.Time
	found := false
	for i := range states {
		st := &states[i]
		if !st.known || st.free || st.tried {
			continue
		}
		t := st.observed.Add(st.lease(ac))
		if !found || t.Before(next) {
			next, found = t, true
		}
	}
	return next, found
}

// act claims a free slot or takes over a slot whose holder has been silent for its
// whole lease. It returns (nil, nil) when there is nothing to do but wait.
func (l *Locker) act(ctx context.Context, tg *target, ac acquireConfig, g *grant, states []slotState) (*Lock, error) {
	for i := range states {
		for attempt := 0; attempt < 3; attempt++ {
			st := &states[i]
			if !st.known || st.tried {
				break
			}
			takeover := !st.free && !g.mine(*st)
			if takeover && now().Before(st.observed.Add(st.lease(ac))) {
				break
			}
			prev := *st
			lk, err := l.claimState(ctx, tg, i, prev, g)
			if err == nil {
				if takeover {
					l.log.Info("kvlock: took over from a holder that stopped renewing",
						"kind", tg.kind, "name", tg.name, "holder", prev.rec.Owner,
						"host", prev.rec.Host, "pid", prev.rec.PID, "lease", prev.lease(ac),
						"token", lk.Token())
				}
				return lk, nil
			}
			if !jserr.IsConflict(err) {
				return nil, err
			}
			// Someone else wrote first, or our view is stale (a marker that expired
			// since). Read the key; the watch also delivers any newer write.
			rs, err := l.readSlot(ctx, tg, i)
			if err != nil {
				return nil, err
			}
			if rs.rev != prev.rev && (rs.rev > prev.rev || rs.rev == 0) {
				*st = rs
				continue
			}
			st.tried = true
		}
	}
	return nil, nil
}

func holders(states []slotState) []Holder {
	var hs []Holder
	for _, st := range states {
		if st.known && !st.free && st.recOK {
			hs = append(hs, st.rec.holder(st.rev))
		}
	}
	return hs
}
