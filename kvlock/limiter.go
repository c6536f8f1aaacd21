package kvlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/naming"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/retry"
)

// MinWindow is the shortest limiter window. The server removes aged permits in a
// periodic check that never runs more often than every 250 ms (nats-server v2.15,
// memory and file stores alike), so with a shorter window permits would only age
// out at those checks and a limiter would admit about n per 250 ms, not n per
// window. Limiter refuses such a window with an error rather than silently
// admitting less than asked for.
const MinWindow = 250 * time.Millisecond

// Limiter admits at most n permits per sliding window across every process that
// uses the same limiter name on the same server or cluster.
//
// It is a stream of its own, WORKQ_LIMIT_<name>, with MaxMsgsPerSubject n,
// Discard New (per subject) and MaxAge window, in memory: a permit is a publish,
// which the server admits only while fewer than n earlier permits are younger than
// the window. The server decides atomically, so client clocks play no part, and a
// permit costs one round trip. The server removes aged permits in a periodic check
// that runs at most every 250 ms (hence MinWindow), so a permit is freed between one
// window and one window plus 250 ms after it was granted: never more than n permits
// in any window, and under saturation somewhat fewer than n per window. Limiter
// state lives in memory: a server restart forgets the permits granted in the current
// window.
type Limiter struct {
	l       *Locker
	name    string
	n       int
	window  time.Duration
	subject string
	stream  jetstream.Stream
}

// Limiter returns the limiter called name (1 to 64 of [A-Za-z0-9_-], because it
// names a stream), admitting n permits per window. A window shorter than MinWindow
// (250 ms) fails with ErrInvalidOption: the server could not free permits that
// often. It creates
// the limiter's stream if needed (with the Locker's Replicas), waiting for the
// server until ctx ends; if the limiter exists with another n or window it fails
// with ErrLimiterConfig.
func (l *Locker) Limiter(ctx context.Context, name string, n int, window time.Duration) (*Limiter, error) {
	if err := naming.Check("limiter", name); err != nil {
		return nil, fmt.Errorf("kvlock: limiter: %w", err)
	}
	if n < 1 {
		return nil, fmt.Errorf("kvlock: limiter %q: rate %d: want at least 1: %w", name, n, ErrInvalidOption)
	}
	if window < MinWindow {
		return nil, fmt.Errorf("kvlock: limiter %q: window %s: want at least %s (kvlock.MinWindow): "+
			"the server frees aged permits at most every 250ms, so a shorter window would admit about %d per 250ms, not %d per %s: %w",
			name, window, MinWindow, n, n, window, ErrInvalidOption)
	}
	if ctx == nil {
		return nil, fmt.Errorf("kvlock: limiter %q: %w", name, option.Nil("context"))
	}
	lim := &Limiter{l: l, name: name, n: n, window: window, subject: "workq.limit." + name}
	cfg := jetstream.StreamConfig{
		Name:                 "WORKQ_LIMIT_" + name,
		Description:          fmt.Sprintf("workq rate limiter %q: %d per %s (kvlock)", name, n, window),
		Subjects:             []string{lim.subject},
		Storage:              jetstream.MemoryStorage,
		Replicas:             l.cfg.replicas,
		MaxMsgsPerSubject:    int64(n),
		MaxAge:               window,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
		Duplicates:           window,
		AllowDirect:          true,
	}
	ctx = retry.WithConn(ctx, l.js.Conn())
	err := retry.Do(ctx, func(ctx context.Context) error {
		// Look the stream up first and create it only when missing: a worker may be
		// allowed to take permits but not to create streams (see package perms).
		st, err := l.js.Stream(ctx, cfg.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			st, err = l.js.CreateStream(ctx, cfg)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				st, err = l.js.Stream(ctx, cfg.Name)
			}
		}
		if err != nil {
			return err
		}
		if c := st.CachedInfo().Config; c.MaxMsgsPerSubject != int64(n) || c.MaxAge != window || !c.DiscardNewPerSubject {
			return fmt.Errorf("exists with %d per %s, asked for %d per %s: %w",
				c.MaxMsgsPerSubject, c.MaxAge, n, window, ErrLimiterConfig)
		}
		lim.stream = st
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kvlock: limiter %q: provision stream: %w", name, err)
	}
	return lim, nil
}

// Name, Rate and Window describe the limiter.
func (lim *Limiter) Name() string          { return lim.name }
func (lim *Limiter) Rate() int             { return lim.n }
func (lim *Limiter) Window() time.Duration { return lim.window }

// Allow asks for one permit without waiting. allowed says whether it was granted;
// when it was not, retryAfter estimates when one frees up (at most one window,
// computed from the server's timestamp of the oldest permit, so it is only as good
// as the agreement between this machine's clock and the server's).
//
// An error means this call got no decision (server unreachable, context ended,
// request timed out): treat it as not allowed, but it may still have used up a
// permit, since a request that reached the server before its reply was lost was
// admitted and counts against the window like any other. The limit itself is never
// exceeded; only fewer permits than n may be usable in that window.
//
// The common path is one round trip; a rejection costs a second one for retryAfter.
// Each request is bounded by ctx and by a few seconds, so a request lost in a
// reconnect fails instead of hanging.
func (lim *Limiter) Allow(ctx context.Context) (allowed bool, retryAfter time.Duration, err error) {
	if ctx == nil {
		return false, 0, lim.errorf("allow", option.Nil("context"))
	}
	return lim.allow(ctx, "")
}

// allow asks for one permit. A non-empty id is the request's message id: a request
// sent again with the same id after its reply was lost is recognised by the
// stream's duplicate window (one window long) and answered with the permit the first
// one took, instead of taking a second.
func (lim *Limiter) allow(ctx context.Context, id string) (allowed bool, retryAfter time.Duration, err error) {
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	err = retry.UntilLeader(actx, func() error { _, err := lim.l.js.Publish(actx, lim.subject, nil, opts...); return err })
	if err == nil {
		lim.l.metrics.decisions.WithLabelValues(resultAllowed).Inc()
		return true, 0, nil
	}
	if !isLimitReached(err) {
		return false, 0, lim.errorf("allow", err)
	}
	lim.l.metrics.decisions.WithLabelValues(resultRejected).Inc()
	return false, lim.retryAfter(actx), nil
}

// Wait blocks until it gets a permit or ctx ends. It sleeps until the oldest permit
// should age out, then asks again; the server stays the judge. While the server is
// unreachable it retries with a capped backoff. Every request of one Wait carries the
// same message id, so a request that was admitted but whose reply was lost is
// answered as admitted when Wait asks again: one Wait takes at most one permit.
func (lim *Limiter) Wait(ctx context.Context) error {
	if ctx == nil {
		return lim.errorf("wait", option.Nil("context"))
	}
	id := nuid.Next()
	delay := 10 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return lim.errorf("wait", err)
		}
		ok, after, err := lim.allow(ctx, id)
		switch {
		case ok:
			return nil
		case err != nil:
			if ctx.Err() != nil {
				return lim.errorf("wait", errors.Join(ctx.Err(), err))
			}
			if !jserr.Transient(err) {
				return err
			}
			after = delay
			delay = min(delay*2, 500*time.Millisecond)
		default:
			delay = 10 * time.Millisecond
		}
		t := time.NewTimer(after)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// retryAfter estimates when the oldest permit in the window ages out, between a
// small floor (the server's expiry check may lag) and one window.
func (lim *Limiter) retryAfter(ctx context.Context) time.Duration {
	floor := min(max(lim.window/20, 5*time.Millisecond), 50*time.Millisecond)
	m, err := lim.stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(lim.subject))
	if err != nil {
		return floor
	}
	d := time.Until(m.Time.Add(lim.window))
	return min(max(d, floor), lim.window)
}

func isLimitReached(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == 10077 &&
		strings.Contains(apiErr.Description, "maximum messages per subject")
}

func (lim *Limiter) errorf(op string, err error) error {
	return fmt.Errorf("kvlock: %s limiter %q: %w", op, lim.name, err)
}
