package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/queue"
)

// Process fills a queue with n jobs and times workers draining it with an empty
// handler: a workq worker (fenced or unfenced, at the given concurrency) against a raw
// Consume callback that acks each message, on a queue provisioned the same way. Both
// are timed until the stream is empty, that is until every ack has landed.
//
// prefetch 0 leaves the worker's default (adaptive).
func Process(ctx context.Context, env Env, n, concurrency, prefetch int, fenced bool) (Pair, error) {
	js := env.JS
	name := "process unfenced"
	if fenced {
		name = "process fenced"
	}
	res := Pair{Scenario: fmt.Sprintf("%s c=%d", name, concurrency), N: n}
	if env.JobTime > 0 {
		res.Scenario += fmt.Sprintf(" job=%s", env.JobTime)
	}
	if prefetch > 0 {
		res.Scenario += fmt.Sprintf(" prefetch=%d", prefetch)
	}

	raw, err := rawQueue(ctx, env, "bench-p-raw")
	if err != nil {
		return res, err
	}
	if err := rawPublishAsync(ctx, js, raw.Names.JobsSubject, n); err != nil {
		return res, err
	}
	d, err := rawConsume(ctx, env, raw, n)
	if err != nil {
		return res, err
	}
	res.Raw = rate(n, d)
	if fenced {
		if res.RawSame, err = rawFenced(ctx, env, n, concurrency, prefetch); err != nil {
			return res, err
		}
	}

	q := queueName("bench-p")
	opts := env.workerOpts(consumer.Concurrency(concurrency), consumer.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if !fenced {
		opts = append(opts, consumer.Unfenced())
	}
	if prefetch > 0 {
		opts = append(opts, consumer.Prefetch(prefetch))
	}
	res.Workq, err = drain(ctx, env, q, n, []int{queue.PriorityNormal}, opts)
	return res, err
}

// drain fills queue q with n empty jobs spread evenly over the priority levels
// given, then times a workq worker with opts and an empty handler draining it, until
// the stream is empty; it returns the jobs per second.
func drain(ctx context.Context, env Env, q string, n int, levels []int, opts []consumer.Option) (float64, error) {
	js := env.JS
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error {
		if env.JobTime > 0 {
			time.Sleep(env.JobTime)
		}
		return nil
	}), opts...)
	if err != nil {
		return 0, err
	}
	names, _ := queue.NamesFor(q)
	for i, level := range levels {
		k := n / len(levels)
		if i == 0 {
			k += n % len(levels)
		}
		if err := rawPublishAsync(ctx, js, names.LevelSubject(level), k); err != nil {
			return 0, err
		}
	}
	stream, err := js.Stream(ctx, names.Stream)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	stop := startWorker(ctx, w)
	defer stop()
	if err := waitEmpty(ctx, stream); err != nil {
		return 0, err
	}
	r := rate(n, time.Since(start))
	if err := stop(); err != nil {
		return 0, err
	}
	if s := w.Stats(); s.Committed != uint64(n) {
		return 0, fmt.Errorf("workq committed %d of %d jobs", s.Committed, n)
	}
	return r, nil
}

// rawConsume drains the raw queue with the workers' consumer config and a Consume
// callback that acks, returning the time until the stream is empty.
func rawConsume(ctx context.Context, env Env, raw *queue.Objects, n int) (time.Duration, error) {
	c, err := rawConsumer(ctx, env, raw, 30*time.Second, 10000)
	if err != nil {
		return 0, err
	}
	var got atomic.Int64
	start := time.Now()
	cc, err := c.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		got.Add(1)
	})
	if err != nil {
		return 0, err
	}
	defer cc.Stop()
	if err := waitEmpty(ctx, raw.Stream); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if got.Load() < int64(n) {
		return 0, fmt.Errorf("raw consume saw %d of %d", got.Load(), n)
	}
	return d, nil
}

// rawFenced is the raw JetStream doing what a fenced run does: consume, and per
// message two compare-and-set KV writes awaited one after the other (the claim, a
// create; the commit, over the claim's revision), then a confirmed ack; pipelined like
// the worker (a goroutine per message, 4×concurrency in flight).
func rawFenced(ctx context.Context, env Env, n, concurrency, prefetch int) (float64, error) {
	js := env.JS
	raw, err := rawQueue(ctx, env, "bench-pf-raw")
	if err != nil {
		return 0, err
	}
	if err := rawPublishAsync(ctx, js, raw.Names.JobsSubject, n); err != nil {
		return 0, err
	}
	c, err := rawConsumer(ctx, env, raw, 30*time.Second, 10000)
	if err != nil {
		return 0, err
	}
	if prefetch == 0 {
		prefetch = 512 // the depth the adaptive worker buffer reaches for empty handlers
	}
	sem := make(chan struct{}, 4*concurrency)
	var failed atomic.Int64
	var wg sync.WaitGroup
	record := make([]byte, 300) // about a job record's size
	start := time.Now()
	cc, err := c.Consume(func(m jetstream.Msg) {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			md, err := m.Metadata()
			if err != nil {
				failed.Add(1)
				return
			}
			subj := "$KV." + raw.Names.Bucket + ".k" + strconv.FormatUint(md.Sequence.Stream, 10)
			// The claim (a create), then the commit over it (a compare-and-set on
			// the claim's revision), each awaited.
			var rev uint64
			for _, write := range []func() (jetstream.PubAckFuture, error){
				func() (jetstream.PubAckFuture, error) {
					return js.PublishMsgAsync(&nats.Msg{Subject: subj, Data: record}, jetstream.WithExpectLastSequencePerSubject(0))
				},
				func() (jetstream.PubAckFuture, error) {
					return js.PublishMsgAsync(&nats.Msg{Subject: subj, Data: record}, jetstream.WithExpectLastSequencePerSubject(rev))
				},
			} {
				f, err := write()
				if err == nil {
					select {
					case ack := <-f.Ok():
						rev = ack.Sequence
					case err = <-f.Err():
					case <-ctx.Done():
						err = ctx.Err()
					}
				}
				if err != nil {
					failed.Add(1)
					return
				}
			}
			err = m.DoubleAck(ctx)
			if err != nil {
				failed.Add(1)
			}
		}()
	}, jetstream.PullMaxMessages(prefetch))
	if err != nil {
		return 0, err
	}
	err = waitEmpty(ctx, raw.Stream)
	d := time.Since(start)
	cc.Stop()
	wg.Wait()
	if err != nil {
		return 0, err
	}
	if f := failed.Load(); f > 0 {
		return 0, fmt.Errorf("raw fenced: %d of %d messages failed", f, n)
	}
	return rate(n, d), nil
}
