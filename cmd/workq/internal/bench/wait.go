package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
)

// waitLead is how long a job's handler runs before it commits: long enough for the
// Wait started after the enqueue to have its watch in place, so that what is timed
// is the commit reaching the waiter, not the watch's set-up.
const waitLead = 5 * time.Millisecond

// WaitLatency measures producer.Wait: from a job's commit (its record's
// FinishedAt, stamped by the worker just before it writes the record) until Wait
// returns the record, n jobs one at a time. The raw side is a KV watch of a key:
// from just before a Put of the key until the watch delivers it, n keys one at a
// time, each watched waitLead before the Put. Both sides time a KV write reaching
// a watcher through the server.
func WaitLatency(ctx context.Context, env Env, n int) (Latency, error) {
	res := Latency{Scenario: "wait: commit to return", N: n}
	js := env.JS

	// Raw: a bucket, one watch per key.
	bucket := queueName("BENCH_WAIT")
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Replicas: env.replicas()})
	if err != nil {
		return res, err
	}
	defer func() { _ = js.DeleteKeyValue(context.WithoutCancel(ctx), bucket) }()

	// workq: a worker whose handler runs waitLead.
	q := queueName("bench-w")
	p, err := producer.New(ctx, js, q, env.producerOpts()...)
	if err != nil {
		return res, err
	}
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error {
		time.Sleep(waitLead)
		return nil
	}), env.workerOpts(consumer.Logger(quiet()))...)
	if err != nil {
		return res, err
	}
	defer startWorker(ctx, w)()

	const warm = 20
	var rl, wl []time.Duration
	for i := range n + warm {
		d, err := rawWatchOnce(ctx, kv, "k"+strconv.Itoa(i))
		if err != nil {
			return res, fmt.Errorf("raw: %w", err)
		}
		if i >= warm {
			rl = append(rl, d)
		}

		info, err := p.Enqueue(ctx, payload)
		if err != nil {
			return res, err
		}
		rec, err := p.Wait(ctx, info.ID)
		if err != nil {
			return res, err
		}
		if rec.State != producer.StateDone {
			return res, fmt.Errorf("job %s ended %s", info.ID, rec.State)
		}
		if i >= warm {
			wl = append(wl, time.Since(rec.FinishedAt))
		}
	}
	res.Workq, res.Raw = percentiles(wl), percentiles(rl)
	return res, nil
}

// rawWatchOnce watches key, puts it waitLead later, and returns the time from the
// Put's start until the watch delivered it.
func rawWatchOnce(ctx context.Context, kv jetstream.KeyValue, key string) (time.Duration, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch, err := kv.Watch(wctx, key, jetstream.UpdatesOnly())
	if err != nil {
		return 0, err
	}
	defer func() { _ = watch.Stop() }()
	time.Sleep(waitLead)
	start := time.Now()
	if _, err := kv.Put(ctx, key, payload); err != nil {
		return 0, err
	}
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case e, ok := <-watch.Updates():
			if !ok {
				return 0, fmt.Errorf("watch of %s ended", key)
			}
			if e != nil {
				return time.Since(start), nil
			}
		}
	}
}
