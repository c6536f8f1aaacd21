package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/producer"
)

// BurstConfig is a schedule-burst scenario: N jobs due at one instant.
type BurstConfig struct {
	N int
	// Concurrency is the workers' handler slots (consumer.Concurrency).
	Concurrency int
	// Lead is how far ahead of the enqueue's start the jobs are due; 0 means
	// DefaultBurstLead(N). When the enqueue does not end burstSpare before the due
	// time, the attempt is dropped (its queue deleted) and made again with the due time
	// further out: Fired.Moved counts the attempts dropped, Fired.Lead is the last lead.
	Lead time.Duration
	// Started, when set, is called from the handler of the delayed workq jobs with each
	// job's id, the time its handler started and the due time the job carries
	// (consumer.Job.ScheduledAt), also for attempts that were dropped: tests check
	// every job of the reported due time started once, none early.
	Started func(id string, at, scheduledAt time.Time)
}

// DefaultBurstLead is the lead time a burst of n jobs gets by default: 1 s, plus
// 40 µs a job for the enqueue (about three times what pipelined delayed enqueues took
// on a quiet 2-core machine, 51 000 jobs/s).
func DefaultBurstLead(n int) time.Duration {
	return time.Second + time.Duration(n)*40*time.Microsecond
}

// burstSpare is how long before the due time the enqueue must have ended: from then
// on, the server is idle until the due time, and the probe has time to measure that.
const burstSpare = 250 * time.Millisecond

// maxBurstMoves is how many times an attempt is dropped before the scenario fails.
const maxBurstMoves = 3

// BurstTimes are a burst's timings, from its reference instant: the due time, the
// enqueue's start, or the workers' start.
type BurstTimes struct {
	// First is when the first job started, AllStarted when the last one started,
	// AllDone when the stream was empty: every job acknowledged (for workq, committed
	// first).
	First, AllStarted, AllDone time.Duration
}

// Fired is one side's burst of jobs due at one instant, timed from the due time.
type Fired struct {
	BurstTimes
	Due time.Time
	// Lead is how far ahead of the enqueue's start Due was set (the last attempt's).
	Lead time.Duration
	// Moved counts attempts dropped because the enqueue did not end burstSpare before
	// their due time.
	Moved int
	// Enqueue is how long enqueueing the jobs took.
	Enqueue time.Duration
	// AllFired is when the server stored the last job it fired (the stream's
	// timestamp of the job's message), from the due time: the server's part of
	// AllStarted.
	AllFired time.Duration
	// ProbeIdle and ProbeFiring are the slowest acknowledgement of single enqueues to
	// the same stream, one every probeEvery, beside the burst: between the enqueue's end
	// and the due time, and from the due time until every job had started. They show
	// whether the server's firing holds up other writes to the stream.
	ProbeIdle, ProbeFiring time.Duration
}

// Burst is how fast n jobs that come due at one instant start and finish, against
// the baselines.
type Burst struct {
	N, Concurrency int
	// Delayed is workq: n jobs enqueued with producer.Job.At, workers of Concurrency
	// handler slots running, timed from the due time.
	Delayed Fired
	// Raw is raw JetStream: n message schedules (Nats-Schedule @at, a target) due at
	// once, a Consume callback that acks, timed from the due time.
	Raw Fired
	// AtOnce is workq's n jobs enqueued to run at once (one pipelined EnqueueBatch)
	// into an idle queue whose workers wait for jobs, timed from the enqueue's start:
	// what a program that enqueues the jobs itself at their time gets.
	AtOnce BurstTimes
	// AtOnceEnqueue is how long that enqueue took: AtOnce less it is the time from the
	// moment all n jobs were in the stream.
	AtOnceEnqueue time.Duration
	// Waiting is workq's n jobs waiting in the queue when the workers start, timed from
	// their start: the workers' pickup alone, with all n jobs there at one instant.
	Waiting BurstTimes
}

// ScheduledBurst measures n jobs due at one instant: the server fires n schedules
// and the workers start and finish the jobs. It runs four sides one after the
// other, each on a new queue deleted after use: raw JetStream's schedules, workq's
// delayed jobs, workq's jobs enqueued at once to waiting workers, workq's jobs
// waiting for the workers to start. A side whose jobs do not all start exactly once,
// or any delayed job that starts before its due time or carries another due time,
// fails the run.
func ScheduledBurst(ctx context.Context, env Env, cfg BurstConfig) (Burst, error) {
	res := Burst{N: cfg.N, Concurrency: cfg.Concurrency}
	if cfg.N < 1 || cfg.Concurrency < 1 {
		return res, fmt.Errorf("burst of %d jobs at concurrency %d: want at least 1 of each", cfg.N, cfg.Concurrency)
	}
	lead := cfg.Lead
	if lead <= 0 {
		lead = DefaultBurstLead(cfg.N)
	}
	var err error
	if res.Raw, err = fire(ctx, cfg.N, lead, func(ctx context.Context) (burstSide, error) {
		return newRawBurst(ctx, env, cfg.N)
	}); err != nil {
		return res, fmt.Errorf("raw schedules: %w", err)
	}
	if res.Delayed, err = fire(ctx, cfg.N, lead, func(ctx context.Context) (burstSide, error) {
		w, err := newBurstWorker(ctx, env, cfg.N, cfg.Concurrency, cfg.Started)
		if err == nil {
			w.run()
		}
		return w, err
	}); err != nil {
		return res, fmt.Errorf("delayed jobs: %w", err)
	}
	if res.AtOnce, res.AtOnceEnqueue, err = atOnce(ctx, env, cfg); err != nil {
		return res, fmt.Errorf("jobs enqueued at once: %w", err)
	}
	if res.Waiting, err = waiting(ctx, env, cfg); err != nil {
		return res, fmt.Errorf("jobs waiting: %w", err)
	}
	return res, nil
}

// burstSide is one side of the burst: a new queue with its workers running.
type burstSide interface {
	// enqueue enqueues n jobs due at due.
	enqueue(ctx context.Context, n int, due time.Time) error
	// probe enqueues one job to run at once, which the workers do not count.
	probe(ctx context.Context) error
	// started waits until every job has started and returns the first and last start,
	// and when the last job's message was stored in the stream.
	started(ctx context.Context) (first, last, stored time.Time, err error)
	// done waits until the stream is empty: every job acknowledged.
	done(ctx context.Context) error
	// check says whether each job started once, none before due.
	check(due time.Time) error
	// close stops the workers and deletes the queue.
	close() error
}

// fire runs one side's burst: a new side (queue and workers) gets n jobs due lead
// after the enqueue's start; the times are taken from the due time. An enqueue that
// ends less than burstSpare before the due time drops the attempt (the queue is
// deleted) and starts again with the due time further out.
func fire(ctx context.Context, n int, lead time.Duration, newSide func(context.Context) (burstSide, error)) (Fired, error) {
	var res Fired
	for {
		side, err := newSide(ctx)
		if err != nil {
			return res, err
		}
		start := time.Now()
		due := start.Add(lead)
		err = side.enqueue(ctx, n, due)
		enqueued := time.Now()
		res.Due, res.Lead, res.Enqueue = due, lead, enqueued.Sub(start)
		if err == nil && due.Sub(enqueued) < burstSpare {
			if err := side.close(); err != nil {
				return res, err
			}
			if res.Moved == maxBurstMoves {
				return res, fmt.Errorf("enqueueing %d jobs took %s, and the due time was moved out %d times, to %s after the enqueue's start: give a longer lead", n, res.Enqueue.Round(time.Millisecond), res.Moved, lead)
			}
			res.Moved++
			lead = max(2*lead, 2*res.Enqueue+burstSpare)
			continue
		}
		if err == nil {
			err = res.measure(ctx, side, enqueued)
		}
		return res, errors.Join(err, side.close())
	}
}

// measure times a side whose jobs are enqueued, probing the stream from the enqueue's
// end until every job has started.
func (res *Fired) measure(ctx context.Context, side burstSide, enqueued time.Time) error {
	pr := startProbe(ctx, side.probe, res.Due)
	first, last, stored, err := side.started(ctx)
	var perr error
	res.ProbeIdle, res.ProbeFiring, perr = pr.stop()
	if err != nil {
		return err
	}
	if perr != nil {
		return fmt.Errorf("probe: %w", perr)
	}
	if err := side.done(ctx); err != nil {
		return err
	}
	res.BurstTimes = BurstTimes{First: first.Sub(res.Due), AllStarted: last.Sub(res.Due), AllDone: time.Since(res.Due)}
	res.AllFired = stored.Sub(res.Due)
	return side.check(res.Due)
}

// atOnce times workq's n jobs enqueued at once into an idle queue, its workers up
// and waiting (they have run a job already), from the enqueue's start.
func atOnce(ctx context.Context, env Env, cfg BurstConfig) (BurstTimes, time.Duration, error) {
	w, err := newBurstWorker(ctx, env, cfg.N, cfg.Concurrency, nil)
	if err != nil {
		return BurstTimes{}, 0, err
	}
	t, enq, err := w.atOnce(ctx)
	return t, enq, errors.Join(err, w.close())
}

func (w *burstWorker) atOnce(ctx context.Context) (BurstTimes, time.Duration, error) {
	w.run()
	if err := w.warm(ctx); err != nil {
		return BurstTimes{}, 0, err
	}
	start := time.Now()
	if err := w.enqueue(ctx, w.n, time.Time{}); err != nil {
		return BurstTimes{}, 0, err
	}
	enq := time.Since(start)
	t, err := w.times(ctx, start)
	return t, enq, err
}

// waiting times workq's workers starting on n jobs waiting in the queue, from their
// start.
func waiting(ctx context.Context, env Env, cfg BurstConfig) (BurstTimes, error) {
	w, err := newBurstWorker(ctx, env, cfg.N, cfg.Concurrency, nil)
	if err != nil {
		return BurstTimes{}, err
	}
	t, err := w.waiting(ctx)
	return t, errors.Join(err, w.close())
}

func (w *burstWorker) waiting(ctx context.Context) (BurstTimes, error) {
	if err := w.enqueue(ctx, w.n, time.Time{}); err != nil {
		return BurstTimes{}, err
	}
	start := time.Now()
	w.run()
	return w.times(ctx, start)
}

// times waits until every job has started and then until all are done, timed from
// start; each must have started once.
func (w *burstWorker) times(ctx context.Context, start time.Time) (BurstTimes, error) {
	first, last, _, err := w.started(ctx)
	if err != nil {
		return BurstTimes{}, err
	}
	if err := w.done(ctx); err != nil {
		return BurstTimes{}, err
	}
	t := BurstTimes{First: first.Sub(start), AllStarted: last.Sub(start), AllDone: time.Since(start)}
	return t, w.check(time.Time{})
}

// jobsAt are n jobs due at due (zero: to run at once).
func jobsAt(n int, due time.Time) []producer.Job {
	jobs := make([]producer.Job, n)
	for i := range jobs {
		jobs[i] = producer.Job{Payload: payload, At: due}
	}
	return jobs
}
