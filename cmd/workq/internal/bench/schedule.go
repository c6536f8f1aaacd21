package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/jobid"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/producer"
)

// EnqueueScheduled enqueues n jobs pipelined with a due time an hour ahead:
// producer.EnqueueBatch of delayed jobs against raw PublishAsync of the same message
// schedules (Nats-Schedule @at, a target, a message id; no reservation of the id).
// Immediate is workq's rate for the same n jobs without a due time, in the same run:
// Workq/Immediate is what delaying a job costs.
func EnqueueScheduled(ctx context.Context, env Env, n int) (Pair, float64, error) {
	res := Pair{Scenario: "enqueue batch scheduled", N: n}
	js := env.JS
	p, err := producer.New(ctx, js, queueName("bench-ea"), env.producerOpts()...)
	if err != nil {
		return res, 0, err
	}
	pi, err := producer.New(ctx, js, queueName("bench-ei"), env.producerOpts()...)
	if err != nil {
		return res, 0, err
	}
	raw, err := rawQueue(ctx, env, "bench-ea-raw")
	if err != nil {
		return res, 0, err
	}
	if raw.SchedulesErr != nil {
		return res, 0, raw.SchedulesErr
	}
	const round = 10000
	due := time.Now().Add(time.Hour)
	scheduled := make([]producer.Job, min(n, round))
	immediate := make([]producer.Job, len(scheduled))
	for i := range scheduled {
		scheduled[i] = producer.Job{Payload: payload, At: due}
		immediate[i] = producer.Job{Payload: payload}
	}
	var tw, tr, ti time.Duration
	for done := 0; done < n; {
		k := min(n-done, round)
		start := time.Now()
		if err := rawPublishScheduled(ctx, js, raw.Names, k, due); err != nil {
			return res, 0, err
		}
		tr += time.Since(start)
		start = time.Now()
		if _, err := p.EnqueueBatch(ctx, scheduled[:k]); err != nil {
			return res, 0, err
		}
		tw += time.Since(start)
		start = time.Now()
		if _, err := pi.EnqueueBatch(ctx, immediate[:k]); err != nil {
			return res, 0, err
		}
		ti += time.Since(start)
		done += k
	}
	res.Workq, res.Raw = rate(n, tw), rate(n, tr)
	return res, rate(n, ti), nil
}

// rawPublishScheduled publishes k message schedules due at due, pipelined.
func rawPublishScheduled(ctx context.Context, js jetstream.JetStream, names queue.Names, k int, due time.Time) error {
	at := "@at " + due.UTC().Format(time.RFC3339Nano)
	return rawPublishMsgs(ctx, js, k, func() *nats.Msg {
		id := jobid.New()
		m := nats.NewMsg(names.DelayedSubject(id))
		m.Data = payload
		m.Header.Set(queue.HeaderNatsSchedule, at)
		m.Header.Set(queue.HeaderNatsScheduleTarget, names.JobSubject(id))
		m.Header.Set(queue.HeaderID, id)
		return m
	})
}

// Burst is how fast a queue's workers start n jobs that come due at the same instant,
// against the same workers starting n jobs waiting in the queue when they start.
type Burst struct {
	N int
	// Lead is how far ahead of the enqueue the due time was set.
	Lead time.Duration
	// Due: from the due time to the first start, and to the last start, of the
	// delayed jobs; Ready: from the workers' start to the first and the last start
	// of the jobs enqueued at once beforehand.
	DueFirst, DueAll, ReadyFirst, ReadyAll time.Duration
	// Early counts delayed jobs that started before their time: a run with any fails.
	Early int
}

// ScheduledBurst enqueues n jobs all due at one instant, with workers of the given
// concurrency running, and times from the due time until each has started; then it
// times the same workers starting n jobs enqueued at once into a queue before they
// start. The first is the server firing n schedules plus the workers' pickup, the
// second the pickup alone. The due time is set lead ahead of the enqueue; when the
// enqueue outlasts it, the run fails rather than time jobs that were due as they
// were enqueued.
func ScheduledBurst(ctx context.Context, env Env, n, concurrency int, lead time.Duration) (Burst, error) {
	res := Burst{N: n, Lead: lead}
	due := time.Now().Add(lead)
	starts, early, err := burst(ctx, env, n, concurrency, func(p *producer.Producer, run func()) error {
		run()
		jobs := make([]producer.Job, n)
		for i := range jobs {
			jobs[i] = producer.Job{Payload: payload, At: due}
		}
		if _, err := p.EnqueueBatch(ctx, jobs); err != nil {
			return err
		}
		if left := time.Until(due); left < 100*time.Millisecond {
			return fmt.Errorf("enqueueing %d delayed jobs took longer than the lead time %s (%s to spare): raise it", n, lead, left)
		}
		return nil
	}, due)
	if err != nil {
		return res, err
	}
	res.DueFirst, res.DueAll, res.Early = starts[0].Sub(due), starts[len(starts)-1].Sub(due), early
	if early > 0 {
		return res, fmt.Errorf("%d of %d delayed jobs started before their time", early, n)
	}
	var ready time.Time
	starts, _, err = burst(ctx, env, n, concurrency, func(p *producer.Producer, run func()) error {
		jobs := make([]producer.Job, n)
		for i := range jobs {
			jobs[i] = producer.Job{Payload: payload}
		}
		if _, err := p.EnqueueBatch(ctx, jobs); err != nil {
			return err
		}
		ready = time.Now()
		run()
		return nil
	}, time.Time{})
	if err != nil {
		return res, err
	}
	res.ReadyFirst, res.ReadyAll = starts[0].Sub(ready), starts[len(starts)-1].Sub(ready)
	return res, nil
}

// burst runs a worker on a new queue (fill enqueues the jobs and calls run to start
// the worker when it wants) and returns the jobs' start times, sorted, once all n
// have started, and how many started before due.
func burst(ctx context.Context, env Env, n, concurrency int, fill func(p *producer.Producer, run func()) error, due time.Time) ([]time.Time, int, error) {
	q := queueName("bench-burst")
	p, err := producer.New(ctx, env.JS, q, env.producerOpts()...)
	if err != nil {
		return nil, 0, err
	}
	var mu sync.Mutex
	starts := make([]time.Time, 0, n)
	all := make(chan struct{})
	w, err := consumer.New(ctx, env.JS, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error {
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, time.Now())
		if len(starts) == n {
			close(all)
		}
		return nil
	}), env.workerOpts(consumer.Concurrency(concurrency), consumer.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))...)
	if err != nil {
		return nil, 0, err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	run := func() { go func() { errc <- w.Run(wctx) }() }
	if err := fill(p, run); err != nil {
		return nil, 0, err
	}
	select {
	case <-all:
	case err := <-errc:
		return nil, 0, fmt.Errorf("worker: %w", err)
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		return nil, 0, fmt.Errorf("%d of %d jobs started: %w", len(starts), n, ctx.Err())
	}
	stop()
	<-errc
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	early := 0
	for _, s := range starts {
		if s.Before(due) {
			early++
		}
	}
	return starts, early, nil
}
