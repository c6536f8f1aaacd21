package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/producer"
)

// Percentiles summarise a latency sample.
type Percentiles struct {
	P50, P99, Max time.Duration
}

func percentiles(ls []time.Duration) Percentiles {
	if len(ls) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ls)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[int(float64(len(s)-1)*q+0.5)] }
	return Percentiles{P50: at(.5), P99: at(.99), Max: s[len(s)-1]}
}

// Latency is one scenario's latency through workq and through raw JetStream: N
// samples each. Lower is better; Ratio is workq's p50 over raw's.
type Latency struct {
	Scenario string
	N        int
	Workq    Percentiles
	Raw      Percentiles
	// Bound, when set, is what the scenario is judged against (for redelivery: AckWait).
	Bound time.Duration
}

// Ratio is workq's median latency over raw JetStream's (≤ 1: workq as fast or faster).
func (l Latency) Ratio() float64 {
	if l.Raw.P50 == 0 {
		return 0
	}
	return float64(l.Workq.P50) / float64(l.Raw.P50)
}

func (l Latency) String() string {
	s := fmt.Sprintf("%-28s n=%-7d workq p50 %7.2fms p99 %7.2fms  raw p50 %7.2fms p99 %7.2fms  ratio %.2f",
		l.Scenario, l.N, ms(l.Workq.P50), ms(l.Workq.P99), ms(l.Raw.P50), ms(l.Raw.P99), l.Ratio())
	if l.Bound > 0 {
		s += fmt.Sprintf("  (bound %s)", l.Bound)
	}
	return s
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// EndToEnd measures enqueue → done, one job at a time (n samples each side): the
// time from calling producer.Enqueue until the job is committed (fenced, the default)
// and acknowledged — gone from the queue — against js.Publish, a raw Consume callback
// that acks, until the message is gone from the stream. Both sides notice the end
// the same way: a loop asking the server for the stream's message count, so the
// observation costs both the same (about one round trip of resolution).
func EndToEnd(ctx context.Context, env Env, n int) (Latency, error) {
	res := Latency{Scenario: "end-to-end latency", N: n}
	js := env.JS

	// Raw: publish, consume, confirmed ack.
	raw, err := rawQueue(ctx, env, "bench-l-raw")
	if err != nil {
		return res, err
	}
	c, err := rawConsumer(ctx, env, raw, 30*time.Second, 1000)
	if err != nil {
		return res, err
	}
	cc, err := c.Consume(func(m jetstream.Msg) { _ = m.Ack() })
	if err != nil {
		return res, err
	}
	defer cc.Stop()

	// workq: producer.Enqueue, a worker with an empty handler.
	lone, err := newLoneJobs(ctx, env, empty)
	if err != nil {
		return res, err
	}
	defer lone.stop()

	// Warm up both paths (connections, consumers, first pulls) before timing.
	var rl, wl []time.Duration
	for i := range n + latencyWarm {
		start := time.Now()
		if _, err := js.Publish(ctx, raw.Names.JobsSubject, payload); err != nil {
			return res, fmt.Errorf("raw publish: %w", err)
		}
		if err := waitGone(ctx, raw.Stream); err != nil {
			return res, fmt.Errorf("raw: %w", err)
		}
		d := time.Since(start)
		if i >= latencyWarm {
			rl = append(rl, d)
		}

		start, _, err = lone.run(ctx)
		if err != nil {
			return res, err
		}
		d = time.Since(start)
		if i >= latencyWarm {
			wl = append(wl, d)
		}
	}
	res.Workq, res.Raw = percentiles(wl), percentiles(rl)
	return res, nil
}

// latencyWarm is the jobs the latency scenario runs through each side before it
// times any: connections, consumers and first pulls are set up by then.
const latencyWarm = 20

// loneJobs is the workq side of the latency scenario: a queue whose worker (every
// scenario's settings, an empty handler) runs jobs enqueued one at a time, each
// waited for until it is gone from the queue.
type loneJobs struct {
	p      *producer.Producer
	stream jetstream.Stream
	stop   func() error // stops the worker
}

// newLoneJobs provisions a new queue and starts its worker, with handler h (empty,
// but where a scenario holds one job of its own); stop stops it.
func newLoneJobs(ctx context.Context, env Env, h consumer.Handler) (*loneJobs, error) {
	q := queueName("bench-l")
	p, err := producer.New(ctx, env.JS, q, env.producerOpts()...)
	if err != nil {
		return nil, err
	}
	w, err := consumer.New(ctx, env.JS, q, h, env.workerOpts(consumer.Logger(quiet()))...)
	if err != nil {
		return nil, err
	}
	names, _ := queue.NamesFor(q)
	stream, err := env.JS.Stream(ctx, names.Stream)
	if err != nil {
		return nil, err
	}
	return &loneJobs{p: p, stream: stream, stop: startWorker(ctx, w)}, nil
}

// run enqueues one job with producer.Enqueue and waits until it is committed and
// acknowledged: gone from the stream, as the server says. It returns when the
// enqueue was called, and the job's id.
func (l *loneJobs) run(ctx context.Context) (start time.Time, id string, err error) {
	start = time.Now()
	info, err := l.p.Enqueue(ctx, payload)
	if err != nil {
		return start, "", err
	}
	if err := waitGone(ctx, l.stream); err != nil {
		return start, "", fmt.Errorf("workq: %w", err)
	}
	return start, info.ID, nil
}

// starts runs n lone jobs after latencyWarm more, one at a time (run), and returns
// each timed one's enqueue → start: from calling producer.Enqueue to its record's
// StartedAt, stamped as its claim is written.
func (l *loneJobs) starts(ctx context.Context, n int) ([]time.Duration, error) {
	var starts []time.Duration
	for i := range n + latencyWarm {
		start, id, err := l.run(ctx)
		if err != nil {
			return nil, err
		}
		rec, err := l.p.Status(ctx, id)
		if err != nil {
			return nil, err
		}
		if i >= latencyWarm {
			starts = append(starts, rec.StartedAt.Sub(start))
		}
	}
	return starts, nil
}

// waitGone asks the server for the stream's message count until it is 0, without
// pausing: the resolution is one round trip.
func waitGone(ctx context.Context, s jetstream.Stream) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stream %s still holds %d messages after 30s", info.Config.Name, info.State.Msgs)
		}
	}
}
