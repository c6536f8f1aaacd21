package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jobid"
	"github.com/workq/workq/producer"
)

// EnqueueSingle enqueues n jobs one at a time, waiting for each acknowledgement:
// producer.Enqueue against js.Publish with a message id (the raw way to get dedup).
func EnqueueSingle(ctx context.Context, env Env, n int) (Pair, error) {
	res := Pair{Scenario: "enqueue single", N: n}
	js := env.JS
	p, err := producer.New(ctx, js, queueName("bench-es"), env.producerOpts()...)
	if err != nil {
		return res, err
	}
	raw, err := rawQueue(ctx, env, "bench-es-raw")
	if err != nil {
		return res, err
	}
	subj := raw.Names.JobsSubject
	// Interleave the two in rounds so that drift on a shared machine hits both alike.
	var tw, tr time.Duration
	for done := 0; done < n; {
		k := min(n-done, max(n/10, 1))
		start := time.Now()
		for range k {
			if _, err := js.Publish(ctx, subj, payload, jetstream.WithMsgID(jobid.New())); err != nil {
				return res, fmt.Errorf("raw publish: %w", err)
			}
		}
		tr += time.Since(start)
		start = time.Now()
		for range k {
			if _, err := p.Enqueue(ctx, payload); err != nil {
				return res, err
			}
		}
		tw += time.Since(start)
		done += k
	}
	res.Workq, res.Raw = rate(n, tw), rate(n, tr)
	return res, nil
}

// EnqueueBatch enqueues n jobs pipelined: producer.EnqueueBatch against
// js.PublishAsync with a message id, waiting for every acknowledgement.
func EnqueueBatch(ctx context.Context, env Env, n int) (Pair, error) {
	res := Pair{Scenario: "enqueue batch", N: n}
	js := env.JS
	p, err := producer.New(ctx, js, queueName("bench-eb"), env.producerOpts()...)
	if err != nil {
		return res, err
	}
	raw, err := rawQueue(ctx, env, "bench-eb-raw")
	if err != nil {
		return res, err
	}
	const round = 10000
	jobs := make([]producer.Job, min(n, round))
	for i := range jobs {
		jobs[i].Payload = payload
	}
	var tw, tr time.Duration
	for done := 0; done < n; {
		k := min(n-done, round)
		start := time.Now()
		if err := rawPublishAsync(ctx, js, raw.Names.JobsSubject, k); err != nil {
			return res, err
		}
		tr += time.Since(start)
		start = time.Now()
		if _, err := p.EnqueueBatch(ctx, jobs[:k]); err != nil {
			return res, err
		}
		tw += time.Since(start)
		done += k
	}
	res.Workq, res.Raw = rate(n, tw), rate(n, tr)
	return res, nil
}

// rawPublishAsync publishes k messages with PublishAsync, as a careful raw user would:
// on the client's stall error it waits for outstanding acks and tries again.
func rawPublishAsync(ctx context.Context, js jetstream.JetStream, subj string, k int) error {
	return rawPublishMsgs(ctx, js, k, func() *nats.Msg {
		m := nats.NewMsg(subj)
		m.Data = payload
		m.Header.Set(jetstream.MsgIDHeader, jobid.New())
		return m
	})
}

// rawPublishMsgs publishes k messages made by next, pipelined, and waits for every
// acknowledgement; on the client's stall error it waits for outstanding acks and
// tries again.
func rawPublishMsgs(ctx context.Context, js jetstream.JetStream, k int, next func() *nats.Msg) error {
	futs := make([]jetstream.PubAckFuture, 0, k)
	for i := 0; i < k; {
		f, err := js.PublishMsgAsync(next())
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("raw publish async: %w", err)
		}
		futs = append(futs, f)
		i++
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("raw publish async: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
