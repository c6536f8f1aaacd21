package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jobid"
	"github.com/workq/workq/producer"
)

// UniqueEnqueue is what a unique enqueue costs beside a plain one: single enqueues,
// each waiting for its acknowledgement, in jobs per second.
type UniqueEnqueue struct {
	N int
	// Unique is producer.Enqueue with producer.Unique, a new key each time.
	Unique float64
	// Duplicate is producer.Enqueue with a key a queued job holds: a duplicate.
	Duplicate float64
	// Plain is producer.Enqueue without a key.
	Plain float64
	// Raw is js.Publish with a message id; RawSame is the raw equivalent of a unique
	// enqueue: a KV Create of the key, then js.Publish with a message id.
	Raw, RawSame float64
}

func (u UniqueEnqueue) String() string {
	return fmt.Sprintf("enqueue unique n=%d: unique %.0f/s, plain %.0f/s (unique/plain %.2f), duplicate %.0f/s (duplicate/plain %.2f); raw publish %.0f/s (plain/raw %.2f), raw create+publish %.0f/s (unique/raw same %.2f)",
		u.N, u.Unique, u.Plain, u.Unique/u.Plain, u.Duplicate, u.Duplicate/u.Plain, u.Raw, u.Plain/u.Raw, u.RawSame, u.Unique/u.RawSame)
}

// EnqueueUniqueSingle enqueues n jobs each way, interleaved in rounds so that drift
// on a shared machine hits every way alike. Unique keys are new each time (the cost
// of a reservation); the duplicates all hit one key held by a queued job (the cost
// of finding the holder).
func EnqueueUniqueSingle(ctx context.Context, env Env, n int) (UniqueEnqueue, error) {
	res := UniqueEnqueue{N: n}
	js := env.JS
	p, err := producer.New(ctx, js, queueName("bench-eu"), env.producerOpts()...)
	if err != nil {
		return res, err
	}
	raw, err := rawQueue(ctx, env, "bench-eu-raw")
	if err != nil {
		return res, err
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: raw.Names.UniqueBucket, History: 1, Replicas: env.replicas()})
	if err != nil {
		return res, err
	}
	if _, err := p.Enqueue(ctx, payload, producer.Unique("held")); err != nil {
		return res, err
	}
	subj := raw.Names.JobsSubject
	var tu, td, tp, tr, ts time.Duration
	timed := func(total *time.Duration, k int, op func(i int) error) error {
		start := time.Now()
		for i := range k {
			if err := op(i); err != nil {
				return err
			}
		}
		*total += time.Since(start)
		return nil
	}
	for done := 0; done < n; {
		k := min(n-done, max(n/10, 1))
		err := timed(&tr, k, func(int) error {
			_, err := js.Publish(ctx, subj, payload, jetstream.WithMsgID(jobid.New()))
			return err
		})
		if err == nil {
			err = timed(&ts, k, func(i int) error {
				if _, err := kv.Create(ctx, "k"+strconv.Itoa(done+i), []byte(`{"job":"x"}`)); err != nil {
					return err
				}
				_, err := js.Publish(ctx, subj, payload, jetstream.WithMsgID(jobid.New()))
				return err
			})
		}
		if err == nil {
			err = timed(&tp, k, func(int) error {
				_, err := p.Enqueue(ctx, payload)
				return err
			})
		}
		if err == nil {
			err = timed(&tu, k, func(i int) error {
				_, err := p.Enqueue(ctx, payload, producer.Unique("k"+strconv.Itoa(done+i)))
				return err
			})
		}
		if err == nil {
			err = timed(&td, k, func(int) error {
				info, err := p.Enqueue(ctx, payload, producer.Unique("held"))
				if err == nil && !info.Duplicate {
					err = fmt.Errorf("enqueue with a held key: %+v, want a duplicate", info)
				}
				return err
			})
		}
		if err != nil {
			return res, err
		}
		done += k
	}
	res.Unique, res.Duplicate, res.Plain, res.Raw, res.RawSame = rate(n, tu), rate(n, td), rate(n, tp), rate(n, tr), rate(n, ts)
	return res, nil
}
