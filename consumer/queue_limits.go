package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/kvlock"
)

// errBadLimits: the queue's stored limits cannot be read (written by another tool).
var errBadLimits = errors.New("unreadable limits")

// limitsRefresh is how often a running worker reads the queue's limits again, so
// that a change (admin.SetLimits, workq queue set) reaches every worker within it.
const limitsRefresh = 2 * time.Second

// queueLimits enforces the queue's limits (queue.Limits, stored in the jobs stream's
// metadata) in one worker: before a delivery is claimed and run it takes a slot of
// the queue's running-jobs semaphore, one of its kind's, then a permit of the queue's
// rate limiter, waiting for each without polling while the delivery's lease keeps it
// alive; the slots are released when the handler returns. The semaphores and the
// limiter are kvlock's, shared by every worker of the queue, so the limits hold
// across processes; a worker that dies loses its slots when their leases (kvlock's
// default, 10 s) run out.
type queueLimits struct {
	w *Worker

	mu      sync.Mutex
	cur     queue.Limits
	locker  *kvlock.Locker // nil until the queue first had limits
	running *kvlock.Semaphore
	byKind  map[string]*kvlock.Semaphore
	rate    *kvlock.Limiter
}

// refresh reads the queue's limits and sets up what enforces them.
func (q *queueLimits) refresh(ctx context.Context) error {
	info, err := q.w.objects.Stream.Info(ctx)
	if err != nil {
		return err
	}
	l, err := queue.LimitsOf(info.Config)
	if err != nil {
		return fmt.Errorf("%w: %w", errBadLimits, err)
	}
	q.mu.Lock()
	same := l.Equal(q.cur)
	q.mu.Unlock()
	if same {
		return nil
	}
	return q.set(ctx, l)
}

// set builds the semaphores and the limiter of limits l.
func (q *queueLimits) set(ctx context.Context, l queue.Limits) error {
	q.mu.Lock()
	locker := q.locker
	q.mu.Unlock()
	if locker == nil && !l.IsZero() {
		var err error
		locker, err = kvlock.New(ctx, q.w.js, kvlock.Bucket(q.w.names.LimitsBucket()), kvlock.Owner(q.w.cfg.name),
			kvlock.Replicas(q.w.objects.Stream.CachedInfo().Config.Replicas), kvlock.Logger(q.w.log))
		if err != nil {
			return fmt.Errorf("limits bucket: %w", err)
		}
	}
	var running *kvlock.Semaphore
	byKind := map[string]*kvlock.Semaphore{}
	var rate *kvlock.Limiter
	var err error
	if l.MaxRunning > 0 {
		if running, err = locker.Semaphore("running", l.MaxRunning); err != nil {
			return err
		}
	}
	for kind, n := range l.MaxRunningByKind {
		if byKind[kind], err = locker.Semaphore("running kind "+kind, n); err != nil {
			return err
		}
	}
	if l.Rate > 0 {
		if rate, err = locker.Limiter(ctx, q.w.names.RateLimiter(), l.Rate, l.RateWindow); err != nil {
			return err
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cur, q.locker, q.running, q.byKind, q.rate = l, locker, running, byKind, rate
	return nil
}

// watch reads the limits every limitsRefresh until ctx ends.
func (q *queueLimits) watch(ctx context.Context) {
	t := time.NewTicker(limitsRefresh)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, limitsRefresh)
		err := q.refresh(rctx)
		cancel()
		switch {
		case errors.Is(err, errBadLimits) && !failing:
			q.w.log.Warn("cannot read the queue's limits; keeping the ones read before", "err", err)
			failing = true
		case err != nil:
			// The server is out of reach: the worker says so in its own ways.
			q.w.log.Debug("read the queue's limits", "err", err)
		default:
			failing = false
		}
	}
}

// holding bounds how many deliveries one level's puller holds (buffered, waiting for
// a limit, or running) while the queue has limits: no more than the worker may run,
// min(Concurrency, MaxRunning), and none in reserve. A worker that held more would
// keep them from the queue's other workers, and from a retry that comes due, while
// they wait for a slot (issue 25: MaxRunning 3 with ~500 prefetched, and a retry 4 s
// late). ok is false when the queue has no limits: the buffer follows the handlers.
func (q *queueLimits) holding(concurrency int) (n int, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cur.IsZero() {
		return 0, false
	}
	if q.cur.MaxRunning > 0 {
		return min(concurrency, q.cur.MaxRunning), true
	}
	return concurrency, true
}

// acquire waits until j may start under the queue's limits and returns what to call
// when it has run. It fails only when ctx ends (the worker stops) or a limit cannot
// be taken for another reason (the server refused it); then nothing is held.
func (q *queueLimits) acquire(ctx context.Context, j *Job) (release func(), err error) {
	q.mu.Lock()
	running, kind, rate := q.running, q.byKind[j.kind], q.rate
	q.mu.Unlock()
	if running == nil && kind == nil && rate == nil {
		return func() {}, nil
	}
	var held []*kvlock.Lock
	release = func() {
		for _, lk := range held {
			q.w.background(func() {
				rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := lk.Release(rctx); err != nil && !errors.Is(err, kvlock.ErrNotHeld) {
					q.w.log.Debug("release a running-job slot", "err", err)
				}
			})
		}
	}
	for _, sem := range []*kvlock.Semaphore{running, kind} {
		if sem == nil {
			continue
		}
		lk, err := sem.Acquire(ctx)
		if err != nil {
			release()
			return nil, fmt.Errorf("job %s: slot of %s: %w", j.id, sem.Name(), err)
		}
		held = append(held, lk)
	}
	if rate != nil {
		// A permit last, right before the start, so that starts follow permits.
		if err := rate.Wait(ctx); err != nil {
			release()
			return nil, fmt.Errorf("job %s: rate permit: %w", j.id, err)
		}
	}
	return release, nil
}
