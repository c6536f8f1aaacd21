// Package groupcommit sends the publishes of many concurrent callers to one stream as
// atomic batches, so that one server write (and, on a server that fsyncs every write,
// one fsync) covers many jobs' record writes or enqueues.
//
// A batch forms only under load, never by waiting: a publish goes out at once while
// fewer than MaxInflight sends are under way; the publishes that arrive while they
// are all under way queue up, and the next free slot sends them together. A lone
// publish therefore costs what it costs without this package, and a busy one shares
// its write with the others that arrived meanwhile.
//
// A batch is all or nothing on the server (ADR-50): one publish whose expectation
// fails (a compare-and-set that lost, a duplicate message id) refuses the whole
// batch, and nothing of it is stored. The writer then sends that batch's publishes
// again one by one, so each gets its own verdict: the lost compare-and-set fails
// alone, the others are stored. Fencing is therefore exactly what it is with single
// publishes.
package groupcommit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The headers of an atomic batch publish.
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
)

// Server error codes of atomic batch publishing that mean the stream cannot take
// batches at all (so the writer stops trying).
const (
	errAtomicDisabled = 10174 // atomic publish is disabled on the stream
)

// DefaultTimeout is Config.Timeout's default: the jetstream package's own default
// request timeout.
const DefaultTimeout = 5 * time.Second

// Config tunes a Writer. The zero value is not useful: see ForReplicas.
type Config struct {
	// MinBatch is the fewest queued publishes sent as a batch; fewer go one by one
	// (pipelined). On a single replica the server stages every batch in a file
	// store of its own before committing it, which costs about as much as 16 single
	// writes (measured); a replicated stream stages in memory and gains from any
	// batch.
	MinBatch int
	// MaxBatch is the most publishes in one batch (the server's limit is 1000).
	MaxBatch int
	// MaxInflight is the most sends (batches or runs of single publishes) under way
	// at once. The server allows 50 batches in flight per stream, shared by every
	// client that writes to it.
	MaxInflight int
	// Timeout bounds the wait for the server's reply to one send, whatever the
	// publishes' own deadlines: a reply lost with a failed server must not hold one
	// of the writer's few send slots (and so every publish queued behind it) for as
	// long as a caller's context allows. A publish that times out gets
	// nats.ErrTimeout, which callers treat as transient and retry; it may have been
	// stored, as with any publish whose reply was lost. 0 means DefaultTimeout.
	Timeout time.Duration
}

// ForReplicas is the configuration for a stream of r replicas. A single replica
// batches only 16 publishes or more (see MinBatch), one send at a time, so that
// publishes pile up into batches large enough to pay for their staging. A
// replicated stream batches any two and keeps 8 sends under way: enough to keep a
// worker's writes flowing, leaving most of the server's 50 batches in flight per
// stream to the queue's other workers and producers.
func ForReplicas(r int) Config {
	if r > 1 {
		return Config{MinBatch: 2, MaxBatch: 256, MaxInflight: 8}
	}
	return Config{MinBatch: 16, MaxBatch: 256, MaxInflight: 1}
}

// Writer groups publishes to one stream into atomic batches. The stream must allow
// atomic publishes (AllowAtomicPublish); a stream that does not makes the writer
// fall back to single publishes for good.
type Writer struct {
	js  jetstream.JetStream
	cfg Config

	mu       sync.Mutex
	queue    []*Publish
	inflight int
	disabled atomic.Bool

	batches, batched, fallbacks atomic.Uint64
}

// New returns a writer that publishes through js.
func New(js jetstream.JetStream, cfg Config) *Writer {
	cfg.MinBatch = max(cfg.MinBatch, 2)
	cfg.MaxBatch = max(cfg.MaxBatch, cfg.MinBatch)
	cfg.MaxInflight = max(cfg.MaxInflight, 1)
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Writer{js: js, cfg: cfg}
}

// Publish is one publish handed to a Writer, a jetstream.PubAckFuture. Its message
// must not be changed until it is settled.
type Publish struct {
	ctx  context.Context
	msg  *nats.Msg
	ok   chan *jetstream.PubAck
	errc chan error
}

// Ok delivers the server's acknowledgement, if the publish is stored.
func (p *Publish) Ok() <-chan *jetstream.PubAck { return p.ok }

// Err delivers why the publish is not known to be stored.
func (p *Publish) Err() <-chan error { return p.errc }

// Msg is the message published.
func (p *Publish) Msg() *nats.Msg { return p.msg }

func (p *Publish) settle(ack *jetstream.PubAck, err error) {
	if err != nil {
		p.errc <- err
		return
	}
	p.ok <- ack
}

// Go queues msg for publishing and returns at once, with the future of its
// acknowledgement. ctx bounds the publish: one whose context has ended before it is
// sent is not sent.
func (w *Writer) Go(ctx context.Context, msg *nats.Msg) *Publish {
	p := &Publish{ctx: ctx, msg: msg, ok: make(chan *jetstream.PubAck, 1), errc: make(chan error, 1)}
	w.mu.Lock()
	w.queue = append(w.queue, p)
	w.startLocked()
	w.mu.Unlock()
	return p
}

// PublishMsg publishes msg and waits for the server's acknowledgement. An error
// with the publish possibly stored (a timeout, a lost connection) is ambiguous, as
// for any publish.
func (w *Writer) PublishMsg(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	p := w.Go(ctx, msg)
	select {
	case ack := <-p.ok:
		return ack, nil
	case err := <-p.errc:
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Stats are a writer's counts so far: batches committed, the publishes they held,
// and batches refused and sent again one by one.
type Stats struct {
	Batches, Batched, Fallbacks uint64
}

// Stats returns the writer's counts.
func (w *Writer) Stats() Stats {
	return Stats{Batches: w.batches.Load(), Batched: w.batched.Load(), Fallbacks: w.fallbacks.Load()}
}

// startLocked sends what is queued while a slot is free.
func (w *Writer) startLocked() {
	for w.inflight < w.cfg.MaxInflight && len(w.queue) > 0 {
		n := min(len(w.queue), w.cfg.MaxBatch)
		unit := w.queue[:n:n]
		w.queue = w.queue[n:]
		if len(w.queue) == 0 {
			w.queue = nil // let the backing array go
		}
		w.inflight++
		go w.send(unit)
	}
}

// send publishes unit, as a batch when it is large enough, and frees its slot.
func (w *Writer) send(unit []*Publish) {
	defer func() {
		w.mu.Lock()
		w.inflight--
		w.startLocked()
		w.mu.Unlock()
	}()
	live := unit[:0]
	for _, p := range unit {
		if err := p.ctx.Err(); err != nil {
			p.settle(nil, err)
			continue
		}
		live = append(live, p)
	}
	if len(live) >= w.cfg.MinBatch && !w.disabled.Load() {
		if w.batch(live) {
			return
		}
		w.fallbacks.Add(1)
	}
	w.singles(live)
}

// singles publishes each of ps on its own, pipelined, and waits for them all.
func (w *Writer) singles(ps []*Publish) {
	futs := make([]jetstream.PubAckFuture, len(ps))
	for i, p := range ps {
		f, err := w.js.PublishMsgAsync(p.msg)
		if err != nil {
			// The connection's async window is full (others share it) or the
			// connection is down: wait for this one publish instead.
			ack, err := w.js.PublishMsg(p.ctx, p.msg)
			p.settle(ack, err)
			continue
		}
		futs[i] = f
	}
	timeout := time.NewTimer(w.cfg.Timeout)
	defer timeout.Stop()
	expired := false
	for i, f := range futs {
		if f == nil {
			continue
		}
		p := ps[i]
		if expired {
			select {
			case ack := <-f.Ok():
				p.settle(ack, nil)
			case err := <-f.Err():
				p.settle(nil, err)
			default:
				p.settle(nil, nats.ErrTimeout)
			}
			continue
		}
		select {
		case ack := <-f.Ok():
			p.settle(ack, nil)
		case err := <-f.Err():
			p.settle(nil, err)
		case <-p.ctx.Done():
			p.settle(nil, p.ctx.Err())
		case <-timeout.C:
			expired = true
			p.settle(nil, nats.ErrTimeout)
		}
	}
}

// For returns a writer for a stream of the given replicas that takes atomic
// publishes, or nil (single publishes) when grouping is off: as asked when asked is
// set, else on for a replicated stream and off for a single replica. A single
// replica stages each batch in a file store of its own, which costs more than the
// batch saves unless the server fsyncs every write (sync_interval: always), and a
// client cannot tell whether it does.
func For(js jetstream.JetStream, asked *bool, replicas int, atomic bool) *Writer {
	on := replicas > 1
	if asked != nil {
		on = *asked
	}
	if !on || !atomic {
		return nil
	}
	return New(js, ForReplicas(replicas))
}
