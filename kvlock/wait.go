package kvlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/workq/workq/internal/jserr"
)

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
