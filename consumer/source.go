package consumer

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
)

// source is one priority level's workers' consumer as this worker pulls from it. A
// consumer delivers in stream order, so each level has its own (queue.LevelConsumer),
// every worker pulls from all of them, one puller each, and a free handler slot takes
// a delivery of the highest level that has one waiting (take).
type source struct {
	level    int
	consumer jetstream.Consumer
	inc      atomic.Pointer[queue.Incarnation] // the consumer's incarnation, as last read
	recheck  chan struct{}                     // asks the fetch loop to read the incarnation now
	unusable atomic.Bool                       // the consumer in its place is one workers cannot use: no pulls until it is mended
	puller   *puller                           // set by Run
	stuck    map[uint64]bool                   // stuck messages a sweep warned of (orphans.go), to warn once; the sweep's own
}

// newSources creates or checks the workers' consumer of every priority level,
// highest first.
func (w *Worker) newSources(ctx context.Context) ([]*source, error) {
	var out []*source
	for _, level := range queue.Levels {
		s := &source{level: level, recheck: make(chan struct{}, 1)}
		c, inc, err := w.ensureConsumer(ctx, s)
		if err != nil {
			return nil, err
		}
		s.consumer = c
		w.setIncarnation(s, inc)
		out = append(out, s)
	}
	return out, nil
}

// ensureConsumer creates or checks the consumer of s's level and reads its
// incarnation.
func (w *Worker) ensureConsumer(ctx context.Context, s *source) (jetstream.Consumer, queue.Incarnation, error) {
	replicas := w.objects.Stream.CachedInfo().Config.Replicas
	c, inc, err := queue.EnsureWorkers(ctx, w.objects, queue.LevelConsumerConfig(w.names, s.level, w.cfg.ackWait, w.cfg.maxAckPending, replicas))
	if err != nil {
		return nil, queue.Incarnation{}, fmt.Errorf("consumer: queue %s: %w", w.names.Queue, err)
	}
	return c, inc, nil
}

// take hands the next delivery to a free slot: one of the highest level that has one
// buffered, else the first to arrive at any level. It returns nil once ctx ends.
func (w *Worker) take(ctx context.Context) *lease {
	for {
		for _, s := range w.sources {
			select {
			case l := <-s.puller.buf:
				if l = s.puller.accept(l); l != nil {
					return l
				}
			default:
			}
		}
		var bufs [4]chan *lease // one per level, highest first (queue.Levels)
		for i, s := range w.sources {
			bufs[i] = s.puller.buf
		}
		var l *lease
		select {
		case l = <-bufs[0]:
		case l = <-bufs[1]:
		case l = <-bufs[2]:
		case l = <-bufs[3]:
		case <-ctx.Done():
			return nil
		}
		if l = l.src.puller.accept(l); l != nil {
			return l
		}
	}
}
