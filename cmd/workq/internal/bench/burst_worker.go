package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/producer"
)

// probeKind is the kind of the jobs a burst's probe enqueues: the handler does not
// count them.
const probeKind = "bench-probe"

// burstWorker is the workq side of a burst: a new queue, a producer and a worker
// (the settings of every scenario's worker, at the burst's concurrency) whose handler
// records when each job starts.
type burstWorker struct {
	env     Env
	names   queue.Names
	p       *producer.Producer
	w       *consumer.Worker
	stream  jetstream.Stream
	onStart func(id string, at, scheduledAt time.Time) // BurstConfig.Started
	probed  chan struct{}                              // a probe job has started

	startLog

	stop func()
	errc chan error
}

func newBurstWorker(ctx context.Context, env Env, n, concurrency int, started func(id string, at, scheduledAt time.Time)) (*burstWorker, error) {
	b := &burstWorker{env: env, onStart: started, probed: make(chan struct{}, 1), startLog: newStartLog(n)}
	q := queueName("bench-burst")
	var err error
	if b.names, err = queue.NamesFor(q); err != nil {
		return nil, err
	}
	if b.p, err = producer.New(ctx, env.JS, q, env.producerOpts()...); err != nil {
		return nil, err
	}
	if b.w, err = consumer.New(ctx, env.JS, q, consumer.HandlerFunc(b.handle),
		env.workerOpts(consumer.Concurrency(concurrency), consumer.Logger(quiet()))...); err != nil {
		cleanupQueue(env.JS, b.names)
		return nil, err
	}
	if b.stream, err = env.JS.Stream(ctx, b.names.Stream); err != nil {
		cleanupQueue(env.JS, b.names)
		return nil, err
	}
	return b, nil
}

// handle is the handler: it notes the job's start and returns.
func (b *burstWorker) handle(_ context.Context, j *consumer.Job) error {
	now := time.Now()
	if j.Kind() == probeKind {
		select {
		case b.probed <- struct{}{}:
		default:
		}
		return nil
	}
	if b.onStart != nil {
		b.onStart(j.ID(), now, j.ScheduledAt())
	}
	b.note(j.ID(), now, j.EnqueuedAt(), j.ScheduledAt(), true)
	return nil
}

// run starts the worker.
func (b *burstWorker) run() {
	ctx, stop := context.WithCancel(context.Background())
	b.stop, b.errc = stop, make(chan error, 1)
	go func() { b.errc <- b.w.Run(ctx) }()
}

// warm enqueues a probe job and waits until the worker has started it: the worker
// is then up and waiting for jobs.
func (b *burstWorker) warm(ctx context.Context) error {
	if err := b.probe(ctx); err != nil {
		return err
	}
	select {
	case <-b.probed:
		return nil
	case err := <-b.errc:
		return fmt.Errorf("worker: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("the worker did not start a first job: %w", ctx.Err())
	}
}

func (b *burstWorker) enqueue(ctx context.Context, n int, due time.Time) error {
	b.setDue(due)
	_, err := b.p.EnqueueBatch(ctx, jobsAt(n, due))
	return err
}

func (b *burstWorker) probe(ctx context.Context) error {
	_, err := b.p.Enqueue(ctx, nil, producer.Kind(probeKind))
	return err
}

func (b *burstWorker) started(ctx context.Context) (first, last, stored time.Time, err error) {
	failed := make(chan error, 1)
	go func() {
		select {
		case err := <-b.errc:
			b.errc <- err // for close
			failed <- fmt.Errorf("worker: %w", err)
		case <-b.all:
		case <-ctx.Done():
		}
	}()
	return b.wait(ctx, failed)
}

// done waits until the stream is empty and checks that the worker committed every
// job.
func (b *burstWorker) done(ctx context.Context) error {
	if err := waitEmpty(ctx, b.stream); err != nil {
		return err
	}
	if s := b.w.Stats(); s.Committed < uint64(b.n) {
		return fmt.Errorf("worker committed %d of %d jobs", s.Committed, b.n)
	}
	return nil
}

func (b *burstWorker) check(time.Time) error { return b.startLog.check() }

// close stops the worker (if it runs) and deletes the queue.
func (b *burstWorker) close() error {
	defer cleanupQueue(b.env.JS, b.names)
	if b.stop == nil {
		return nil
	}
	b.stop()
	if err := <-b.errc; err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}
