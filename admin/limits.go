package admin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/kvlock"
)

// Limits bound how a queue's jobs run across all its workers, in every process:
// stored with the queue, so that every worker obeys the same values, and read again
// by running workers every 2 s. The zero value limits nothing.
//
// A worker takes a slot of the queue's running jobs (and of the job's kind) before it
// claims and runs a delivery, then a rate permit, waiting for each without polling
// while it keeps the delivery alive with heartbeats; it frees the slots when the
// handler returns. Slots are kvlock semaphore slots in the bucket WORKQ_<queue>_LIMITS,
// the rate a kvlock limiter (stream WORKQ_LIMIT_queue-<queue>): a worker that dies
// frees its slots when their leases run out (10 s). A lowered MaxRunning applies as
// the jobs running above it end.
type Limits struct {
	// MaxRunning is how many of the queue's jobs may run at once; 0: no limit.
	MaxRunning int `json:"max_running,omitempty"`
	// MaxRunningByKind bounds the running jobs of each kind named, beside MaxRunning.
	MaxRunningByKind map[string]int `json:"max_running_by_kind,omitempty"`
	// Rate is how many of the queue's jobs may start per RateWindow (at least
	// 250 ms, the server's expiry check); 0: no limit.
	Rate int `json:"rate,omitempty"`
	// RateWindow is the rate's sliding window.
	RateWindow Duration `json:"rate_window,omitempty"`
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l.internal().IsZero() }

func (l Limits) internal() queue.Limits {
	return queue.Limits{MaxRunning: l.MaxRunning, MaxRunningByKind: maps.Clone(l.MaxRunningByKind), Rate: l.Rate, RateWindow: time.Duration(l.RateWindow)}
}

func limitsOf(l queue.Limits) Limits {
	return Limits{MaxRunning: l.MaxRunning, MaxRunningByKind: l.MaxRunningByKind, Rate: l.Rate, RateWindow: Duration(l.RateWindow)}
}

// SetLimits stores limits l on queue name, replacing its limits, and returns the
// ones it replaced. Running workers obey them within 2 s. Invalid limits (negative,
// above 1024 running, a rate window under 250 ms) are ErrInvalidOption.
func (a *Admin) SetLimits(ctx context.Context, name string, l Limits) (Limits, error) {
	n, err := names(ctx, name)
	if err != nil {
		return Limits{}, err
	}
	want := l.internal()
	if err := want.Check(); err != nil {
		return Limits{}, fmt.Errorf("admin: queue %s: limits: %w", n.Queue, option.Invalid("Limits", fmt.Sprintf("%+v", l), err.Error()))
	}
	s, err := a.jobsStream(ctx, n)
	if err != nil {
		return Limits{}, err
	}
	var old queue.Limits
	err = retry.Do(ctx, func(ctx context.Context) error {
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if old, err = queue.LimitsOf(info.Config); err != nil {
			old = queue.Limits{} // unreadable: replaced
		}
		_, err = a.js.UpdateStream(ctx, queue.WithLimits(info.Config, want))
		return err
	})
	if err != nil {
		return Limits{}, fmt.Errorf("queue %s: set limits: %w", n.Queue, err)
	}
	if want.Rate > 0 && (want.Rate != old.Rate || want.RateWindow != old.RateWindow) {
		if err := a.setRate(ctx, n, want); err != nil {
			return limitsOf(old), err
		}
	}
	if err := a.provisionLimits(ctx, n, s.CachedInfo().Config.Replicas, want); err != nil {
		return limitsOf(old), err
	}
	return limitsOf(old), nil
}

// provisionLimits creates what workers need to obey limits l, if it is missing: the
// queue's limits bucket and, for a rate, its limiter. Workers create them too, but
// a worker may lack the right to (see package perms): the operator setting the
// limits provisions them.
func (a *Admin) provisionLimits(ctx context.Context, n queue.Names, replicas int, l queue.Limits) error {
	if l.IsZero() {
		return nil
	}
	locker, err := kvlock.New(ctx, a.js, kvlock.Bucket(n.LimitsBucket()), kvlock.Replicas(replicas))
	if err != nil {
		return fmt.Errorf("queue %s: limits bucket: %w", n.Queue, err)
	}
	if l.Rate > 0 {
		if _, err := locker.Limiter(ctx, n.RateLimiter(), l.Rate, l.RateWindow); err != nil {
			return fmt.Errorf("queue %s: rate limiter: %w", n.Queue, err)
		}
	}
	return nil
}

// setRate changes the rate of the queue's limiter stream, if it exists, in place:
// workers holding it obey the new rate at once (the server enforces it), and those
// that open it with the new rate find it matching. The workers create it otherwise.
func (a *Admin) setRate(ctx context.Context, n queue.Names, l queue.Limits) error {
	stream := "WORKQ_LIMIT_" + n.RateLimiter()
	return retry.Do(ctx, func(ctx context.Context) error {
		s, err := a.js.Stream(ctx, stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("queue %s: rate limiter %s: %w", n.Queue, stream, err)
		}
		cfg := s.CachedInfo().Config
		cfg.MaxMsgsPerSubject, cfg.MaxAge, cfg.Duplicates = int64(l.Rate), l.RateWindow, l.RateWindow
		if _, err := a.js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("queue %s: rate limiter %s: %w", n.Queue, stream, err)
		}
		return nil
	})
}
