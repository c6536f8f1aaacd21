package kvlock

import (
	"context"
	"time"

	"github.com/workq/workq/internal/jserr"
)

// lease is how long a slot's value may stay unchanged before a waiter may take it
// over: the lease its holder recorded, or ours for a value we cannot read.
func (st *slotState) lease(ac acquireConfig) time.Duration {
	if st.recOK {
		return st.rec.lease()
	}
	return ac.ttl
}

// nextTakeover is when the first slot in states that is held and not yet tried
// may be taken over, and false when there is none.
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
