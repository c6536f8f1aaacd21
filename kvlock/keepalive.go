package kvlock

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/internal/jserr"
)

// keepalive renews the lock every third of its lease until Release stops it or the
// lock is lost. A renewal re-publishes the grant's value with the previous revision
// expected and the server TTL set again (KeyValue.Update would drop the TTL). A
// renewal that fails for a transient reason is retried until the lease, as trusted
// by this holder, runs out.
func (lk *Lock) keepalive() {
	defer close(lk.done)
	if lk.noRenew {
		lk.mu.Lock()
		end := lk.validUntil
		lk.mu.Unlock()
		t := time.NewTimer(time.Until(end))
		defer t.Stop()
		select {
		case <-lk.stopCtx.Done():
		case <-t.C:
			lk.finish(stateLost, fmt.Errorf("%s %q (token %d): %w: lease ended (not renewed)", lk.kind, lk.name, lk.token, ErrLost))
		}
		return
	}
	interval := lk.lease / 3
	retry := max(lk.lease/20, 5*time.Millisecond)
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-lk.stopCtx.Done():
			return
		case <-timer.C:
		}
		if !lk.renew(retry) {
			return
		}
		lk.mu.Lock()
		next := lk.validUntil.Add(-trusted(lk.lease)).Add(interval)
		lk.mu.Unlock()
		timer.Reset(max(time.Until(next), 0))
	}
}

// renew renews once, retrying until success (true), or until the lock is lost or
// released (false).
func (lk *Lock) renew(retry time.Duration) bool {
	lk.mu.Lock()
	rev, lostAt := lk.rev, lk.validUntil
	lk.mu.Unlock()
	ctx, cancel := context.WithDeadline(lk.stopCtx, lostAt)
	defer cancel()
	for {
		if lk.paused.Load() {
			// A frozen process sends nothing; its clock still runs out.
			<-ctx.Done()
		}
		if lk.stopCtx.Err() != nil {
			return false
		}
		if !now().Before(lostAt) {
			lk.lose(reasonExpired, errLeaseRanOut)
			return false
		}
		sent := now()
		// Bound each attempt: a publish made while the connection is down may never
		// get its reply, and the next attempt must not wait for it until lostAt.
		actx, acancel := context.WithTimeout(ctx, attemptTimeout)
		newRev, err := lk.l.write(actx, lk.key, lk.data, rev, serverTTL(lk.lease))
		acancel()
		if err == nil {
			lk.mu.Lock()
			lk.rev = newRev
			lk.validUntil = sent.Add(trusted(lk.lease))
			lk.mu.Unlock()
			return true
		}
		if lk.stopCtx.Err() != nil {
			return false
		}
		if jserr.IsConflict(err) {
			// Either someone else wrote, or an earlier renewal of ours landed though
			// its reply was lost. The value's grant id tells.
			rctx, rcancel := context.WithTimeout(ctx, attemptTimeout)
			st, rerr := lk.l.read(rctx, lk.key)
			rcancel()
			if rerr == nil && st.rev > rev {
				if !st.free && st.recOK && st.rec.ID == lk.rec.ID {
					rev = st.rev
					lk.mu.Lock()
					lk.rev = rev
					lk.mu.Unlock()
					continue // renew again on the adopted revision; lostAt unchanged
				}
				lk.lose(reasonTakenOver, errSuperseded)
				return false
			}
		}
		lk.l.log.Debug("kvlock: renewal failed, retrying", "kind", lk.kind, "name", lk.name,
			"token", lk.token, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
}
