package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/faultproxy"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/producer"
)

// Redelivery measures how long a stalled worker's job takes to reach another worker:
// from the moment the first worker freezes (its link to the server stops, as in a
// long GC pause or a partition; its heartbeats stop with it) to the moment a second
// worker starts the job, against the consumer's AckWait. The raw equivalent is
// JetStream's own redelivery of an unacked message under the same stall: a Consume
// behind a proxy receives the message, the proxy freezes with that Consume still
// open, and another Consume on the same consumer receives the redelivery. samples
// rounds each, a fresh queue per round. The stalling side connects with env.Dial
// through a proxy to the node JS is connected to.
//
// With crash, the first worker's connection closes instead (a process that died):
// the server drops its pull requests at once.
//
// A frozen client still has a pull request outstanding at the server, which does
// not know it is frozen: the first redelivery can go to that request and be lost in
// the frozen link, and the job then waits for a second AckWait. Both sides see this.
func Redelivery(ctx context.Context, env Env, samples int, ackWait time.Duration, crash bool) (Latency, error) {
	res := Latency{Scenario: fmt.Sprintf("redelivery after stall ackwait=%s", ackWait), N: samples, Bound: ackWait}
	if crash {
		res.Scenario = fmt.Sprintf("redelivery after crash ackwait=%s", ackWait)
	}
	var rl, wl []time.Duration
	for range samples {
		d, err := rawRedelivery(ctx, env, ackWait, crash)
		if err != nil {
			return res, fmt.Errorf("raw redelivery: %w", err)
		}
		rl = append(rl, d)
		d, err = workqRedelivery(ctx, env, ackWait, crash)
		if err != nil {
			return res, fmt.Errorf("workq redelivery: %w", err)
		}
		wl = append(wl, d)
	}
	res.Workq, res.Raw = percentiles(wl), percentiles(rl)
	return res, nil
}

func rawRedelivery(ctx context.Context, env Env, ackWait time.Duration, crash bool) (time.Duration, error) {
	js := env.JS
	raw, err := rawQueue(ctx, env, "bench-r-raw")
	if err != nil {
		return 0, err
	}
	defer cleanupQueue(js, raw.Names)
	c, err := rawConsumer(ctx, env, raw, ackWait, 1000)
	if err != nil {
		return 0, err
	}
	if _, err := js.Publish(ctx, raw.Names.JobsSubject, payload); err != nil {
		return 0, err
	}
	// The consumer that stalls is behind a proxy, exactly like the workq worker that
	// stalls: it receives the message, then its link freezes with its Consume (and
	// its pull request) still open, as in a GC pause or a partition.
	proxy, nc, jsa, err := behindProxy(ctx, env)
	if err != nil {
		return 0, err
	}
	defer proxy.Close()
	defer nc.Close()
	ca, err := jsa.Consumer(ctx, raw.Names.Stream, raw.Names.Consumer)
	if err != nil {
		return 0, err
	}
	stalled := make(chan time.Time, 1)
	cca, err := ca.Consume(func(m jetstream.Msg) {
		select {
		case stalled <- time.Now(): // received and never acked: the stall starts here
			if crash {
				go nc.Close()
			} else {
				proxy.Pause()
			}
		default:
		}
	})
	if err != nil {
		return 0, err
	}
	defer cca.Stop()
	var stallAt time.Time
	select {
	case stallAt = <-stalled:
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("the first consumer got no message within 30s")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	got := make(chan time.Time, 1)
	cb, err := c.Consume(func(m jetstream.Msg) {
		now := time.Now()
		_ = m.Ack()
		select {
		case got <- now:
		default:
		}
	})
	if err != nil {
		return 0, err
	}
	defer cb.Stop()
	select {
	case at := <-got:
		return at.Sub(stallAt), nil
	case <-time.After(10*ackWait + 60*time.Second):
		return 0, fmt.Errorf("no redelivery within %s", 10*ackWait+60*time.Second)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func workqRedelivery(ctx context.Context, env Env, ackWait time.Duration, crash bool) (time.Duration, error) {
	js := env.JS
	q := queueName("bench-r")
	names, _ := queue.NamesFor(q)
	defer cleanupQueue(js, names)
	p, err := producer.New(ctx, js, q, env.producerOpts()...)
	if err != nil {
		return 0, err
	}
	if _, err := p.Enqueue(ctx, payload); err != nil {
		return 0, err
	}
	proxy, nc, jsa, err := behindProxy(ctx, env)
	if err != nil {
		return 0, err
	}
	defer proxy.Close()
	defer nc.Close()
	opts := []consumer.Option{consumer.AckWait(ackWait), consumer.Concurrency(1), consumer.Replicas(env.replicas()),
		consumer.Logger(quiet()), consumer.DrainTimeout(time.Second)}
	stalled := make(chan time.Time, 1)
	redelivered := make(chan time.Time, 1)
	release := make(chan struct{}) // closed when the measurement is done: the stalled worker wakes up
	var once sync.Once
	a, err := consumer.New(ctx, jsa, q, consumer.HandlerFunc(func(hctx context.Context, j *consumer.Job) error {
		first := false
		once.Do(func() { first = true })
		if !first {
			return nil
		}
		_, _ = j.FencingToken(ctx) // the claim is written, as a job under way would have
		if crash {
			nc.Close()
		} else {
			proxy.Pause()
		}
		stalled <- time.Now()
		select {
		case <-release:
		case <-time.After(10*ackWait + 30*time.Second):
		case <-ctx.Done():
		}
		proxy.Resume()
		return nil // the commit is refused: the job was reassigned
	}), append(opts, consumer.Name("bench-stall"))...)
	if err != nil {
		return 0, err
	}
	b, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error {
		select {
		case redelivered <- time.Now():
		default:
		}
		return nil
	}), append(opts, consumer.Name("bench-takeover"))...)
	if err != nil {
		return 0, err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	defer stop()
	wg.Add(1)
	go func() { defer wg.Done(); _ = a.Run(wctx) }()
	var stallAt time.Time
	select {
	case stallAt = <-stalled:
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("the first worker got no job within 30s")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = b.Run(wctx) }()
	select {
	case at := <-redelivered:
		return at.Sub(stallAt), nil
	case <-time.After(10*ackWait + 30*time.Second):
		ci, _ := js.Consumer(ctx, names.Stream, names.Consumer)
		var info any
		if ci != nil {
			i, _ := ci.Info(ctx)
			info = fmt.Sprintf("%+v %+v waiting=%d ackpending=%d pending=%d redel=%d", i.Delivered, i.AckFloor, i.NumWaiting, i.NumAckPending, i.NumPending, i.NumRedelivered)
		}
		return 0, fmt.Errorf("no redelivery within %s: A %+v B %+v consumer %v", 10*ackWait+30*time.Second, a.Stats(), b.Stats(), info)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// behindProxy connects to env.JS's server (on a cluster, the node it is connected
// to) through a fault-injection proxy, so that the connection can be frozen
// (proxy.Pause) or cut (nc.Close).
func behindProxy(ctx context.Context, env Env) (*faultproxy.Proxy, *nats.Conn, jetstream.JetStream, error) {
	proxy, err := faultproxy.New(env.JS.Conn().ConnectedUrl())
	if err != nil {
		return nil, nil, nil, err
	}
	nc, err := env.dial(ctx, proxy.URL())
	if err != nil {
		proxy.Close()
		return nil, nil, nil, fmt.Errorf("connect through the proxy: %w", err)
	}
	jsa, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		proxy.Close()
		return nil, nil, nil, err
	}
	return proxy, nc, jsa, nil
}

// cleanupQueue deletes a queue's streams and bucket so that many small scenarios do
// not pile up on a shared server. Best effort.
func cleanupQueue(js jetstream.JetStream, n queue.Names) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = js.DeleteStream(ctx, n.Stream)
	_ = js.DeleteStream(ctx, n.DeadStream)
	_ = js.DeleteKeyValue(ctx, n.Bucket)
}
