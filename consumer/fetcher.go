package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fetch pulls deliveries with Consume and hands each to a free handler slot on jobs.
// The pull buffer holds Prefetch messages; the callback blocks until a slot takes
// one, so nothing is buffered beyond that. When consumption ends while ctx is live
// (the consumer was deleted, say by a server that lost its state), it recreates the
// consumer and starts again; reconnects are handled by Consume itself.
//
// When ctx ends it stops pulling and hands back every buffered delivery, then returns
// nil; it returns an error only if the connection is closed for good.
func (w *Worker) fetch(ctx context.Context, jobs chan<- jetstream.Msg) error {
	delay := 20 * time.Millisecond
	for {
		done := make(chan struct{})
		cc, err := w.consumer.Consume(func(msg jetstream.Msg) {
			select {
			case jobs <- msg:
			case <-ctx.Done():
				w.handBack(msg) // stopping: buffered, never started
			}
		},
			jetstream.PullMaxMessages(w.cfg.prefetch),
			// Short pulls with frequent idle heartbeats: a pull request the server no
			// longer holds (seen under load: the client waits on a pull the server shows
			// no trace of) is noticed after two missed heartbeats, not after 30s.
			jetstream.PullExpiry(5*time.Second),
			jetstream.PullHeartbeat(time.Second),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				if !errors.Is(err, jetstream.ErrNoHeartbeat) {
					w.log.Debug("pull", "err", err)
				}
			}),
		)
		if err == nil {
			go func() { <-cc.Closed(); close(done) }()
			select {
			case <-ctx.Done():
				cc.Drain() // the callback hands back what is still buffered
				<-done
				return nil
			case <-done:
				// Consumption ended by itself: see why and start again.
			}
		}
		if w.js.Conn().IsClosed() {
			return fmt.Errorf("pull: %w", jetstream.ErrConnectionClosed)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			w.log.Warn("pull failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
		if c, err := w.ensureConsumer(ctx); err == nil {
			w.consumer = c
			w.log.Info("pull restarted")
		}
	}
}
