package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jobid"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/producer"
)

// ScheduledPair is an enqueue scenario of delayed jobs: workq enqueueing jobs due
// later against raw JetStream publishing the same message schedules (the Pair), and
// Immediate, workq enqueueing the same number of jobs to run at once, with the same
// producer settings, in the same run.
type ScheduledPair struct {
	Pair
	// Immediate is workq's rate without a due time, jobs/s. Workq/Immediate is what
	// delaying a job costs its enqueue. With group commit on, immediate jobs may share
	// atomic batches; delayed ones never do (each carries an expectation, "the id is
	// not scheduled yet", that would fail a whole atomic batch).
	Immediate float64
}

// ImmediateRatio is the delayed jobs' rate over the immediate ones'.
func (s ScheduledPair) ImmediateRatio() float64 {
	if s.Immediate == 0 {
		return 0
	}
	return s.Workq / s.Immediate
}

// scheduledQueues are the three queues of a scheduled-enqueue scenario: workq's for
// delayed jobs and for immediate ones, and raw's.
type scheduledQueues struct {
	delayed, immediate *producer.Producer
	raw                *queue.Objects
}

func newScheduledQueues(ctx context.Context, env Env, prefix string) (scheduledQueues, error) {
	var q scheduledQueues
	var err error
	if q.delayed, err = producer.New(ctx, env.JS, queueName(prefix+"-d"), env.producerOpts()...); err != nil {
		return q, err
	}
	if q.immediate, err = producer.New(ctx, env.JS, queueName(prefix+"-i"), env.producerOpts()...); err != nil {
		return q, err
	}
	if q.raw, err = rawQueue(ctx, env, prefix+"-raw"); err != nil {
		return q, err
	}
	return q, q.raw.SchedulesErr
}

// cleanup deletes the queues: the delayed jobs are due in an hour, and against a
// running server (--server) they would fire then into queues nobody reads.
func (q scheduledQueues) cleanup(js jetstream.JetStream) {
	for _, p := range []*producer.Producer{q.delayed, q.immediate} {
		if p != nil {
			if n, err := queue.NamesFor(p.Queue()); err == nil {
				cleanupQueue(js, n)
			}
		}
	}
	if q.raw != nil {
		cleanupQueue(js, q.raw.Names)
	}
}

// EnqueueScheduled enqueues n jobs pipelined with a due time an hour ahead:
// producer.EnqueueBatch of delayed jobs against raw PublishAsync of the same message
// schedules (Nats-Schedule @at, a target, a message id; no reservation of the id),
// and workq's EnqueueBatch of n jobs to run at once, interleaved in rounds.
func EnqueueScheduled(ctx context.Context, env Env, n int) (ScheduledPair, error) {
	res := ScheduledPair{Pair: Pair{Scenario: "enqueue batch scheduled", N: n}}
	q, err := newScheduledQueues(ctx, env, "bench-eba")
	defer q.cleanup(env.JS)
	if err != nil {
		return res, err
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
		if err := rawPublishScheduled(ctx, env.JS, q.raw.Names, k, due); err != nil {
			return res, err
		}
		tr += time.Since(start)
		start = time.Now()
		if _, err := q.delayed.EnqueueBatch(ctx, scheduled[:k]); err != nil {
			return res, err
		}
		tw += time.Since(start)
		start = time.Now()
		if _, err := q.immediate.EnqueueBatch(ctx, immediate[:k]); err != nil {
			return res, err
		}
		ti += time.Since(start)
		done += k
	}
	res.Workq, res.Raw, res.Immediate = rate(n, tw), rate(n, tr), rate(n, ti)
	return res, nil
}

// EnqueueSingleScheduled enqueues n jobs due an hour ahead one at a time, waiting for
// each acknowledgement: producer.Enqueue with producer.At against js.PublishMsg of the
// same message schedule, and producer.Enqueue of n jobs to run at once, interleaved
// in rounds like EnqueueSingle.
func EnqueueSingleScheduled(ctx context.Context, env Env, n int) (ScheduledPair, error) {
	res := ScheduledPair{Pair: Pair{Scenario: "enqueue single scheduled", N: n}}
	q, err := newScheduledQueues(ctx, env, "bench-esa")
	defer q.cleanup(env.JS)
	if err != nil {
		return res, err
	}
	due := time.Now().Add(time.Hour)
	at := scheduleHeader(due)
	var tw, tr, ti time.Duration
	for done := 0; done < n; {
		k := min(n-done, max(n/10, 1))
		start := time.Now()
		for range k {
			if _, err := env.JS.PublishMsg(ctx, rawSchedule(q.raw.Names, at)); err != nil {
				return res, fmt.Errorf("raw publish: %w", err)
			}
		}
		tr += time.Since(start)
		start = time.Now()
		for range k {
			if _, err := q.delayed.Enqueue(ctx, payload, producer.At(due)); err != nil {
				return res, err
			}
		}
		tw += time.Since(start)
		start = time.Now()
		for range k {
			if _, err := q.immediate.Enqueue(ctx, payload); err != nil {
				return res, err
			}
		}
		ti += time.Since(start)
		done += k
	}
	res.Workq, res.Raw, res.Immediate = rate(n, tw), rate(n, tr), rate(n, ti)
	return res, nil
}

// rawPublishScheduled publishes k message schedules due at due, pipelined.
func rawPublishScheduled(ctx context.Context, js jetstream.JetStream, names queue.Names, k int, due time.Time) error {
	at := scheduleHeader(due)
	return rawPublishMsgs(ctx, js, k, func() *nats.Msg { return rawSchedule(names, at) })
}

// scheduleHeader is the Nats-Schedule value of a message due at due.
func scheduleHeader(due time.Time) string { return "@at " + due.UTC().Format(time.RFC3339Nano) }

// rawSchedule is what a raw JetStream user publishes to have a job fired at a time:
// a message schedule on the queue's delayed subject with the job's subject as its
// target and a message id for dedup; at is its Nats-Schedule value.
func rawSchedule(names queue.Names, at string) *nats.Msg {
	id := jobid.New()
	m := nats.NewMsg(names.DelayedSubject(id))
	m.Data = payload
	m.Header.Set(queue.HeaderNatsSchedule, at)
	m.Header.Set(queue.HeaderNatsScheduleTarget, names.JobSubject(id))
	m.Header.Set(queue.HeaderID, id)
	return m
}
