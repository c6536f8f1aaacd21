package kvlock

import (
	"context"
	"encoding/json"
	"time"
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

// stamp sets the grant's Acquired time to at and its value to match.
func (g *grant) stamp(at time.Time) error {
	g.rec.Acquired = at.UTC()
	data, err := json.Marshal(g.rec)
	if err != nil {
		return err
	}
	g.data = data
	return nil
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
	if !g.mine(st) {
		// Acquired is when the lock is granted: this write, not the Acquire call,
		// which may have waited. A write of the grant that landed already keeps its time.
		if err := g.stamp(time.Now()); err != nil {
			return nil, err
		}
	}
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
