// Package bench measures workq side by side with the raw JetStream equivalent in the
// same process, against the same server, so the ratio between them says what workq
// costs. The Go benchmarks and `workq bench` both run these scenarios.
//
// It is also `workq bench` but for its flags: Run runs the scenarios the command
// asks for (Config) on the server it chose (Embedded, External) and returns the
// report (Report, printed by Report.Print); WorkerProcess is the backlog scenario's
// worker, which runs in a child process of its own (WorkerCommand).
package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/producer"
)

// Env is the server a scenario runs against and how it provisions what it creates.
type Env struct {
	JS jetstream.JetStream
	// Replicas of every stream, bucket and consumer a scenario creates, on the workq
	// side and on the raw side alike, so that the ratio compares like with like (an
	// R3 queue against R1 raw streams would measure replication, not workq). 0 means 1.
	Replicas int
	// URL is where the scenarios' extra connections go (lock holders, child
	// processes): on a cluster, every node's URL, comma separated. "" means the URL
	// JS's connection is connected to.
	URL string
	// Dial opens those connections the way the caller connects (credentials, TLS).
	// nil means nats.Connect.
	Dial Dial
	// GroupCommit, when set, turns the workq side's group commit on or off
	// (consumer.GroupCommit, producer.GroupCommit); nil leaves their default.
	GroupCommit *bool
	// JobTime is how long the handler of the process scenarios' workq workers takes
	// per job (a sleep); 0 means an empty handler. The raw side stays empty.
	JobTime time.Duration
}

// Dial connects to a server URL the way the caller connects (credentials, TLS). The
// redelivery scenario uses it to put the stalling worker behind a proxy.
type Dial func(ctx context.Context, url string) (*nats.Conn, error)

// replicas is the replica count to create things with: at least 1.
func (e Env) replicas() int { return max(e.Replicas, 1) }

// producerOpts are the options every scenario's producer gets.
func (e Env) producerOpts() []producer.Option {
	opts := []producer.Option{producer.Replicas(e.replicas())}
	if e.GroupCommit != nil {
		opts = append(opts, producer.GroupCommit(*e.GroupCommit))
	}
	return opts
}

// workerOpts are the options every scenario's worker gets, before its own.
func (e Env) workerOpts(more ...consumer.Option) []consumer.Option {
	opts := []consumer.Option{consumer.Replicas(e.replicas())}
	if e.GroupCommit != nil {
		opts = append(opts, consumer.GroupCommit(*e.GroupCommit))
	}
	return append(opts, more...)
}

// GroupCommitOn says whether workq's producers and workers use group commit:
// GroupCommit when set, else the library's default, on for a replicated queue (the
// rule of internal/groupcommit.For). Delayed jobs never go through it.
func (e Env) GroupCommitOn() bool {
	if e.GroupCommit != nil {
		return *e.GroupCommit
	}
	return e.replicas() > 1
}

// url is where extra connections go.
func (e Env) url() string {
	if e.URL != "" {
		return e.URL
	}
	return e.JS.Conn().ConnectedUrl()
}

// dial opens an extra connection to url.
func (e Env) dial(ctx context.Context, url string) (*nats.Conn, error) {
	if e.Dial != nil {
		return e.Dial(ctx, url)
	}
	return nats.Connect(url)
}

// Pair is one scenario's throughput through workq and through raw JetStream, in
// operations (jobs) per second.
type Pair struct {
	Scenario string
	N        int
	Workq    float64
	Raw      float64
	// RawSame, when measured, is the raw JetStream doing the same work as workq (for
	// fenced processing: consume, one KV write per job, a confirmed ack), so that
	// Workq/RawSame is workq's own overhead and Raw/RawSame the price of the guarantee.
	RawSame float64
}

// Ratio is workq's throughput over raw JetStream's.
func (p Pair) Ratio() float64 {
	if p.Raw == 0 {
		return 0
	}
	return p.Workq / p.Raw
}

func (p Pair) String() string {
	s := fmt.Sprintf("%-28s n=%-7d workq %9.0f/s  raw %9.0f/s  ratio %.2f", p.Scenario, p.N, p.Workq, p.Raw, p.Ratio())
	if p.RawSame > 0 {
		s += fmt.Sprintf("  (raw doing the same work %7.0f/s, ratio %.2f)", p.RawSame, p.Workq/p.RawSame)
	}
	return s
}

var seq atomic.Int64

// queueName returns a queue name not used before in this process.
func queueName(prefix string) string {
	return prefix + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(seq.Add(1), 10)
}

// startWorker runs w until the returned stop is called: stop ends Run, waits for it
// to return and returns its error, the same on every call.
func startWorker(ctx context.Context, w *consumer.Worker) (stop func() error) {
	wctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(wctx) }()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			cancel()
			err = <-errc
		})
		return err
	}
}

// empty is the handler of the scenarios' workers that run empty jobs: it does
// nothing, so what is measured is the queue's own work.
var empty = consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil })

// payload is the job payload every scenario uses: 128 bytes.
var payload = make([]byte, 128)

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// rawQueue provisions a queue exactly as workq does (with env's replicas), for the
// raw side to use.
func rawQueue(ctx context.Context, env Env, prefix string) (*queue.Objects, error) {
	n, err := queue.NamesFor(queueName(prefix))
	if err != nil {
		return nil, err
	}
	return queue.Provision(ctx, env.JS, n, queue.Config{Replicas: env.replicas()})
}

// rawConsumer creates the raw side's consumer on a raw queue: the workers' consumer
// config (explicit ack, the job filters, unlimited deliveries) with env's replicas.
func rawConsumer(ctx context.Context, env Env, raw *queue.Objects, ackWait time.Duration, maxAckPending int) (jetstream.Consumer, error) {
	return queue.EnsureConsumer(ctx, raw.Stream, queue.ConsumerConfig(raw.Names, ackWait, maxAckPending, env.replicas()))
}

// waitEmpty waits until stream s holds no messages (a WorkQueue stream drops a job
// when it is acked, so this is "every ack has landed").
func waitEmpty(ctx context.Context, s jetstream.Stream) error {
	for {
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stream %s still holds %d messages: %w", info.Config.Name, info.State.Msgs, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
