package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/attempt"
	"github.com/workq/workq/internal/groupcommit"
	"github.com/workq/workq/internal/naming"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/retry"
)

// Re-exported so callers need not import the internal packages.
var (
	// ErrInvalidName: a queue name workq cannot use.
	ErrInvalidName = naming.ErrInvalid
	// ErrInvalidOption: an option given a value it does not take (the error names
	// the option, the value and what it wants), options that contradict each other
	// (a Heartbeat not shorter than AckWait), or a nil context, JetStream or
	// handler. The same value as producer.ErrInvalidOption and
	// kvlock.ErrInvalidOption.
	ErrInvalidOption = option.ErrInvalid
	// ErrIncompatible: the queue or its consumer exists with a configuration this
	// worker cannot use (for example another AckWait).
	ErrIncompatible = queue.ErrIncompatible
	// ErrNeedsCluster: Replicas asks for more replicas than the server can place (a
	// single server keeps one).
	ErrNeedsCluster = queue.ErrNeedsCluster
	// ErrNotProvisioned: the queue, or one of its consumers, does not exist, and
	// the worker's user may not create it; an operator creates the queue first
	// (admin.CreateQueue, 'workq queue create'). The error names what is missing and
	// wraps the server's nats.ErrPermissionViolation.
	ErrNotProvisioned = queue.ErrNotProvisioned
)

// errDrained is the cause of a handler context cancelled because the worker stopped
// and the drain timeout passed.
var errDrained = errors.New("worker stopped: drain timeout passed")

// Worker pulls jobs from one queue and runs a Handler on them.
type Worker struct {
	js       jetstream.JetStream
	names    queue.Names
	objects  *queue.Objects
	records  record.Store
	sources  []*source // the priority levels' consumers, highest first (source.go)
	handler  Handler
	cfg      config
	log      *slog.Logger
	identity record.Worker
	stats    counters
	metrics  *workerMetrics
	running  atomic.Bool
	health   atomic.Pointer[error] // why pulls fail; nil while they work
	observe  attempt.Observer      // told each run's outcome; from Run's context, usually nil (observe.go)

	limits    queueLimits       // the queue's limits (queue_limits.go)
	gateCtx   context.Context   // ends when Run stops pulling: waiting for a limit stops then
	uniques   queue.LazyUniques // the unique bucket, opened by the first unique job (unique.go)
	held      held              // deliveries held, by stream sequence (see twins.go)
	ahead     aheadClaims       // claims found ahead of a delivery (ahead.go)
	finishing chan struct{}     // bounds background outcome writes
	finishers sync.WaitGroup    // background outcome writes in progress
}

// New returns a worker for queue, creating the queue and its workers' consumer if
// they are missing. While the server is unreachable it waits, until ctx ends. A nil
// ctx, js or h is an error; nil options are skipped.
func New(ctx context.Context, js jetstream.JetStream, queueName string, h Handler, opts ...Option) (*Worker, error) {
	switch {
	case ctx == nil:
		return nil, fmt.Errorf("consumer: queue %s: %w", queueName, option.Nil("context"))
	case js == nil:
		return nil, fmt.Errorf("consumer: queue %s: %w", queueName, option.Nil("JetStream"))
	case h == nil, isNilFunc(h):
		return nil, fmt.Errorf("consumer: queue %s: %w", queueName, option.Nil("handler"))
	}
	cfg := defaults()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("consumer: queue %s: %w", queueName, err)
		}
	}
	if cfg.heartbeat == 0 {
		cfg.heartbeat = cfg.ackWait / 3
	}
	if cfg.heartbeat >= cfg.ackWait {
		return nil, fmt.Errorf("consumer: queue %s: %w", queueName,
			option.Invalid("Heartbeat", cfg.heartbeat, "shorter than AckWait ("+cfg.ackWait.String()+")"))
	}
	if cfg.maxAckPending == 0 {
		buffer := cfg.prefetch
		if buffer < 0 {
			buffer = maxAutoPrefetch
		}
		cfg.maxAckPending = max(DefaultMaxAckPending, 4*(cfg.concurrency+buffer))
	}
	names, err := queue.NamesFor(queueName)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	ctx = retry.WithConn(ctx, js.Conn()) // a request the user may not make fails rather than waits
	m, err := newMetrics(cfg.registerer, names.Queue)
	if err != nil {
		return nil, fmt.Errorf("consumer: queue %s: register metrics: %w", names.Queue, err)
	}
	objs, err := queue.Provision(ctx, js, names, cfg.queue)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	records, err := record.NewStore(ctx, js, objs.Records, names.Bucket, false)
	if err != nil {
		return nil, fmt.Errorf("consumer: queue %s: %w", names.Queue, err)
	}
	records.Group = groupcommit.For(js, cfg.groupCommit, objs.Stream.CachedInfo().Config.Replicas, objs.AtomicRecords)
	w := &Worker{
		js: js, names: names, objects: objs, records: records,
		handler: Chain(h, cfg.middleware...), cfg: cfg, metrics: m,
		log: cfg.logger.With("queue", queueName, "worker", cfg.name),
	}
	host, _ := os.Hostname()
	w.identity = record.Worker{Name: cfg.name, Host: host, PID: os.Getpid()}
	if w.sources, err = w.newSources(ctx); err != nil {
		return nil, err
	}
	w.limits.w = w
	if err := w.limits.refresh(ctx); err != nil {
		return nil, fmt.Errorf("consumer: queue %s: read the queue's limits: %w", names.Queue, err)
	}
	return w, nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	s := w.stats.snapshot()
	if g := w.records.Group; g != nil {
		gs := g.Stats()
		s.GroupCommits, s.GroupCommitted = gs.Batches, gs.Batched
	}
	return s
}

// Name is the worker's name.
func (w *Worker) Name() string { return w.cfg.name }

// Run pulls and runs jobs until ctx ends, then stops pulling, lets running jobs
// finish for up to the drain timeout, cancels the rest and hands every unfinished or
// buffered job back for prompt redelivery. It returns nil after such a clean stop,
// or an error if the connection was closed under it. Run may be called once at a time;
// a nil ctx is an error.
func (w *Worker) Run(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("consumer: queue %s: Run: %w", w.names.Queue, option.Nil("context"))
	}
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("consumer: Run is already running")
	}
	defer w.running.Store(false)
	w.observe = attempt.ObserverOf(ctx)

	// Handlers run on a context that outlives ctx until the drain timeout.
	handlerCtx, cancelHandlers := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelHandlers(nil)

	// Each of the concurrency goroutines is a handler slot: it takes a delivery,
	// claims and runs it. Fenced outcomes (commit, ack) are written in the
	// background so the slot moves on at once; finishing bounds how many are pending.
	w.finishing = make(chan struct{}, 4*w.cfg.concurrency)
	for _, s := range w.sources {
		s.puller = w.newPuller(s)
	}
	slotCtx, stopSlots := context.WithCancel(ctx) // also ends if fetching fails for good
	defer stopSlots()
	w.gateCtx = slotCtx
	var slots sync.WaitGroup
	slots.Add(1)
	go func() { defer slots.Done(); w.limits.watch(slotCtx) }()
	for range w.cfg.concurrency {
		slots.Add(1)
		go func() {
			defer slots.Done()
			for {
				l := w.take(slotCtx)
				if l == nil {
					return
				}
				start := time.Now()
				w.process(handlerCtx, l)
				l.src.puller.done(time.Since(start))
			}
		}()
	}
	// Each level's puller fetches until ctx ends, or until the connection is closed
	// for good, which stops them all.
	fetchCtx, stopFetching := context.WithCancel(ctx)
	defer stopFetching()
	var fetchers sync.WaitGroup
	var fetchErr error
	var fetchErrOnce sync.Once
	for _, s := range w.sources {
		fetchers.Add(1)
		go func() {
			defer fetchers.Done()
			if err := s.puller.fetch(fetchCtx); err != nil {
				fetchErrOnce.Do(func() { fetchErr = err })
				stopFetching()
			}
		}()
	}
	fetchers.Wait()
	stopSlots()

	stop := time.AfterFunc(w.cfg.drainTimeout, func() { cancelHandlers(errDrained) })
	defer stop.Stop()
	slots.Wait()
	w.finishers.Wait()
	// Acks and naks are sent without waiting for replies: make sure the last ones
	// have reached the server before the caller closes the connection.
	_ = w.js.Conn().FlushTimeout(time.Second)
	if fetchErr != nil {
		return fmt.Errorf("consumer: queue %s: %w", w.names.Queue, fetchErr)
	}
	return nil
}

// background runs fn off the handler slot, bounded by the finishing semaphore.
func (w *Worker) background(fn func()) {
	w.finishing <- struct{}{}
	w.finishers.Add(1)
	go func() {
		defer func() { <-w.finishing; w.finishers.Done() }()
		fn()
	}()
}

// handBack gives back a delivery that never started, for prompt redelivery. Fenced,
// it first writes the hand-back into the job record, so that it does not count as an
// attempt.
func (w *Worker) handBack(l *lease) {
	l.stop()
	if !w.cfg.unfenced {
		if md, err := l.msg.Metadata(); err == nil {
			w.accountHandBack(w.newJob(l, md))
		}
	}
	if err := l.msg.Nak(); err != nil {
		w.log.Debug("hand back", "err", err)
	}
	w.stats.handedBack.Add(1)
}

// process handles one delivery on the fenced or unfenced path.
func (w *Worker) process(ctx context.Context, l *lease) {
	md, err := l.msg.Metadata()
	if err != nil {
		l.stop()
		w.log.Error("delivery without JetStream metadata; terminating it", "subject", l.msg.Subject(), "err", err)
		_ = l.msg.Term()
		return
	}
	h := w.held.hold(md.Sequence.Stream, l)
	if h == twinOfLive {
		// A twin of a delivery this worker still holds: leave the job to that one.
		l.stop()
		w.stats.twins.Add(1)
		w.log.Debug("delivery of a job this worker still holds; left to the first (the server forgot the first delivery)",
			"subject", l.msg.Subject(), "sequence", md.Sequence.Stream)
		return
	}
	if md.NumDelivered > 1 {
		w.stats.redelivered.Add(1)
		w.metrics.redeliveries.Inc()
	}
	j := w.newJob(l, md)
	j.twin = h == twinOfRecent
	if n := len(l.msg.Headers().Get(queue.HeaderKind)); n > queue.MaxKindLen {
		// Any client may set the kind; one this long could not be kept in the record.
		w.reject(ctx, j, fmt.Errorf("%w: kind of %d bytes, longer than %d", ErrMalformed, n, queue.MaxKindLen))
		return
	}
	if j.unique != "" {
		if err := queue.CheckUniqueKey(j.unique); err != nil {
			j.unique = "" // no key to hold or release
			w.reject(ctx, j, fmt.Errorf("%w: %w", ErrMalformed, err))
			return
		}
	}
	release, err := w.limits.acquire(w.gateCtx, j)
	if err != nil {
		if w.gateCtx.Err() != nil {
			w.handBack(l) // stopping while it waited for a limit
			return
		}
		w.stats.errors.Add(1)
		w.log.Warn("cannot take the queue's limits; the job will be redelivered", "job", j.id, "err", err)
		j.nak(w.cfg.backoff(1))
		return
	}
	defer release()
	if w.cfg.unfenced {
		w.processUnfenced(ctx, j)
		return
	}
	w.processFenced(ctx, j)
}

// reject dead-letters a job that cannot be run, without running it.
func (w *Worker) reject(ctx context.Context, j *Job, reason error) {
	reason = Permanent(reason)
	if w.cfg.unfenced {
		w.putRecord(ctx, j, record.Dead, reason, 0)
		w.deadLetter(ctx, j, reason, false)
		return
	}
	j.claim = w.fresh(j, 0)
	w.deadLetter(ctx, j, reason, true)
}

// run calls the handler, its delivery kept alive by its lease, and returns its error
// and the cause of its context's end, if it ended. A fenced run's lease checks the
// claim beside each progress report: a claim taken by another delivery cancels the
// handler with ErrStale, a cancel of the job with ErrCancelled. An unfenced run's
// lease checks for a cancel only.
func (w *Worker) run(ctx context.Context, j *Job) (err, cause error) {
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if w.cfg.timeout > 0 {
		var c context.CancelFunc
		hctx, c = context.WithTimeoutCause(hctx, w.cfg.timeout, fmt.Errorf("job %s: timeout %s passed", j.id, w.cfg.timeout))
		defer c()
	}
	j.mu.Lock()
	j.cancel = cancel
	j.mu.Unlock()
	if j.fenced {
		j.lease.watch(func() { w.checkClaim(j, cancel) })
	} else {
		j.lease.watch(func() { w.checkCancelled(j, cancel) })
	}
	defer j.lease.watch(nil)
	var claimTimer *time.Timer
	if j.fenced && j.token() == 0 {
		// A first attempt that outlives ClaimDelay writes its claim, so Status shows it
		// running and a redelivery knows to fence it out.
		claimTimer = time.AfterFunc(w.cfg.claimDelay, func() {
			cctx, c := context.WithTimeout(context.Background(), w.cfg.ackWait)
			defer c()
			_, _ = j.ensureClaimed(cctx)
		})
	}
	w.stats.started.Add(1)
	start := time.Now()
	if j.md.NumDelivered == 1 {
		j.metrics.observeWait(j.md.Timestamp, start)
	}
	w.metrics.inFlight.Inc()
	err = safeCall(hctx, w.handler, j)
	j.metrics.duration.Observe(time.Since(start).Seconds())
	w.metrics.inFlight.Dec()
	if claimTimer != nil {
		claimTimer.Stop()
	}
	if hctx.Err() != nil {
		cause = context.Cause(hctx)
	}
	return err, cause
}

// checkClaim is a running fenced job's claim check: if another delivery has claimed
// the job, or the job was cancelled, the handler is cancelled with ErrStale (or
// ErrCancelled, which matches ErrStale too) and the delivery's progress reports stop. The check may take longer than a short heartbeat interval (a slow server, a
// claim being written): it gets up to half of what is left of AckWait after a
// heartbeat, and never less than the interval.
func (w *Worker) checkClaim(j *Job, cancel context.CancelCauseFunc) {
	ctx, c := context.WithTimeout(context.Background(), max(w.cfg.heartbeat, (w.cfg.ackWait-w.cfg.heartbeat)/2))
	defer c()
	if err := j.Fence(ctx); errors.Is(err, ErrStale) {
		j.lease.stop()
		cancel(err)
	}
}
