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
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/quickstop"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/workflow"
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
	claims   atomic.Pointer[error] // why claims fail for good (claim_errors.go); nil while they work
	observe  attempt.Observer      // told each run's outcome; from Run's context, usually nil (observe.go)
	quick    bool                  // end open pulls at once on stop; from Run's context (internal/quickstop)

	limits    queueLimits        // the queue's limits (queue_limits.go)
	gateCtx   context.Context    // ends when Run stops pulling: waiting for a limit stops then
	uniques   queue.LazyUniques  // the unique bucket, opened by the first unique job (unique.go)
	flows     *workflow.Releaser // tells workflow tasks' dependents (workflow.go)
	runIDs    *runIDs            // makes the ids of this worker's runs (claim.go)
	finishing chan struct{}      // bounds background outcome writes
	finishers sync.WaitGroup     // background outcome writes in progress
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
		handler: Chain(h, cfg.middleware...), cfg: cfg, metrics: m, runIDs: newRunIDs(),
		log:   cfg.logger.With("queue", queueName, "worker", cfg.name),
		flows: &workflow.Releaser{Store: records, JS: js, Names: names},
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
	w.quick = quickstop.Of(ctx)

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
	slots.Add(1)
	go func() { defer slots.Done(); w.sweepEnqueues(slotCtx) }()
	expiry, _ := pullTimes(w.cfg.ackWait, w.cfg.heartbeat)
	for range w.cfg.concurrency {
		slots.Add(1)
		go func() {
			defer slots.Done()
			w.firstPulls(slotCtx, expiry)
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

// handBack gives back a delivery that never started, for prompt redelivery. It
// wrote nothing: a claim is written only by a delivery that runs.
func (w *Worker) handBack(l *lease) {
	if err := l.settle(msgNak, 0); err != nil {
		w.log.Debug("hand back", "err", err)
	}
	w.stats.handedBack.Add(1)
}
