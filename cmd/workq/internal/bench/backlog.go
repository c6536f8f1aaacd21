package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/queue"
)

// BacklogConfig describes a backlog scenario: the same worker drains a queue holding
// Base jobs, then one holding N jobs; the question is whether a deep backlog slows
// it down or makes it grow.
type BacklogConfig struct {
	Base, N     int
	Concurrency int  // default 32
	Prefetch    int  // default 512 (0 in the worker would mean Concurrency)
	Fenced      bool // default unfenced: the fastest path, so that the queue is what is measured
	// Worker drains queue of n jobs; nil runs it in this process (MaxRSS then unknown).
	// `workq bench` runs it in a child process to measure the worker's memory alone.
	Worker BacklogWorker
}

// BacklogWorker drains a queue of n jobs and reports how it went.
type BacklogWorker func(ctx context.Context, queue string, n int) (WorkerResult, error)

// WorkerResult is a worker's report after draining a queue.
type WorkerResult struct {
	Jobs    int     `json:"jobs"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate"`
	// MaxRSS is the worker process's peak resident set size in bytes (0: unknown).
	MaxRSS int64 `json:"max_rss"`
}

// WorkerSettings are the worker options a backlog drain uses.
type WorkerSettings struct {
	Concurrency, Prefetch int
	Fenced                bool
	// Replicas is the queue's replica count, which the worker checks (0: 1):
	// RunBacklog's Env's.
	Replicas int
}

// Backlog is the result of a backlog scenario.
type Backlog struct {
	Base, N           int
	WorkqBase, WorkqN WorkerResult
	RawBase, RawN     float64 // raw consume+ack, jobs/s
	Settings          WorkerSettings
}

// WorkqRatio is the worker's rate on the deep backlog over its rate on the base one.
func (b Backlog) WorkqRatio() float64 {
	if b.WorkqBase.Rate == 0 {
		return 0
	}
	return b.WorkqN.Rate / b.WorkqBase.Rate
}

// RawRatio is the same for raw consume + ack.
func (b Backlog) RawRatio() float64 {
	if b.RawBase == 0 {
		return 0
	}
	return b.RawN / b.RawBase
}

func (b Backlog) String() string {
	return fmt.Sprintf("backlog %d vs %d: workq %.0f/s vs %.0f/s (ratio %.2f, worker peak RSS %.1f MiB vs %.1f MiB)  raw %.0f/s vs %.0f/s (ratio %.2f)",
		b.N, b.Base, b.WorkqN.Rate, b.WorkqBase.Rate, b.WorkqRatio(), mib(b.WorkqN.MaxRSS), mib(b.WorkqBase.MaxRSS),
		b.RawN, b.RawBase, b.RawRatio())
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// RunBacklog runs the scenario: for Base and then N jobs, fill a raw queue and time
// raw consume + ack draining it, then fill a workq queue (plain publishes: valid
// jobs) and time the worker draining it. Each queue is deleted after use.
// progress, if not nil, is told the phase.
func RunBacklog(ctx context.Context, env Env, cfg BacklogConfig, progress func(phase string)) (Backlog, error) {
	js := env.JS
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 32
	}
	if cfg.Prefetch == 0 {
		cfg.Prefetch = 512
	}
	set := WorkerSettings{Concurrency: cfg.Concurrency, Prefetch: cfg.Prefetch, Fenced: cfg.Fenced, Replicas: env.replicas()}
	if cfg.Worker == nil {
		cfg.Worker = func(ctx context.Context, q string, n int) (WorkerResult, error) {
			r, err := Drain(ctx, js, q, n, set)
			r.MaxRSS = 0 // this process's peak includes everything else in it
			return r, err
		}
	}
	if progress == nil {
		progress = func(string) {}
	}
	res := Backlog{Base: cfg.Base, N: cfg.N, Settings: set}
	for _, size := range []int{cfg.Base, cfg.N} {
		progress(fmt.Sprintf("raw: publish %d", size))
		raw, err := rawQueue(ctx, env, "bench-b-raw")
		if err != nil {
			return res, err
		}
		if err := rawPublishAsync(ctx, js, raw.Names.JobsSubject, size); err != nil {
			cleanupQueue(js, raw.Names)
			return res, err
		}
		progress(fmt.Sprintf("raw: consume %d", size))
		d, err := rawConsume(ctx, env, raw, size)
		cleanupQueue(js, raw.Names)
		if err != nil {
			return res, err
		}

		progress(fmt.Sprintf("workq: publish %d", size))
		names, err := queue.NamesFor(queueName("bench-b"))
		if err != nil {
			return res, err
		}
		if _, err := queue.Provision(ctx, js, names, queue.Config{Replicas: env.replicas()}); err != nil {
			return res, err
		}
		if err := rawPublishAsync(ctx, js, names.JobsSubject, size); err != nil {
			cleanupQueue(js, names)
			return res, err
		}
		progress(fmt.Sprintf("workq: drain %d", size))
		wr, err := cfg.Worker(ctx, names.Queue, size)
		cleanupQueue(js, names)
		if err != nil {
			return res, err
		}
		if size == cfg.Base {
			res.RawBase, res.WorkqBase = rate(size, d), wr
		} else {
			res.RawN, res.WorkqN = rate(size, d), wr
		}
	}
	return res, nil
}

// Drain runs a workq worker with an empty handler on queue q until its stream is
// empty (every job committed and acked) and reports the rate. It is the worker side
// of the backlog scenario, in this process or in `workq bench-worker`. The queue
// exists; the worker checks that it has s.Replicas replicas.
func Drain(ctx context.Context, js jetstream.JetStream, q string, n int, s WorkerSettings) (WorkerResult, error) {
	res := WorkerResult{Jobs: n}
	names, err := queue.NamesFor(q)
	if err != nil {
		return res, err
	}
	opts := []consumer.Option{consumer.Concurrency(max(s.Concurrency, 1)), consumer.Replicas(max(s.Replicas, 1)), consumer.Logger(quiet())}
	if s.Prefetch > 0 {
		opts = append(opts, consumer.Prefetch(s.Prefetch))
	}
	if !s.Fenced {
		opts = append(opts, consumer.Unfenced())
	}
	w, err := consumer.New(ctx, js, q, empty, opts...)
	if err != nil {
		return res, err
	}
	stream, err := js.Stream(ctx, names.Stream)
	if err != nil {
		return res, err
	}
	start := time.Now()
	stop := startWorker(ctx, w)
	defer stop()
	if err := waitEmpty(ctx, stream); err != nil {
		return res, err
	}
	d := time.Since(start)
	if err := stop(); err != nil {
		return res, err
	}
	if c := w.Stats().Committed; c < uint64(n) {
		return res, fmt.Errorf("worker committed %d of %d jobs", c, n)
	}
	res.Seconds, res.Rate = d.Seconds(), rate(n, d)
	res.MaxRSS = MaxRSS()
	return res, nil
}
