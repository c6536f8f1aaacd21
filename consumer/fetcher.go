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
	expiry, idle := pullTimes(w.cfg.ackWait, w.cfg.heartbeat)
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
			// Ask for more as soon as an eighth of the buffer is free, not half of it
			// (the client's default): the buffer stays full, so fast handlers do not wait
			// on a pull round trip, and it never holds more than Prefetch.
			jetstream.PullThresholdMessages(w.cfg.prefetch-max(1, w.cfg.prefetch/8)+1),
			jetstream.PullExpiry(expiry),
			jetstream.PullHeartbeat(idle),
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

// pullTimes returns the expiry of each pull request and the idle heartbeat the
// server sends on it.
//
// A worker that freezes (a long GC pause, a stalled link) still has a pull request
// open at the server. Were it still open when the frozen job's AckWait ran out, the
// server would redeliver the job into it, to the frozen worker again, and the job
// would wait a second AckWait. That AckWait runs out no sooner than AckWait minus the
// heartbeat interval after the worker froze, so pulls expire before that (and within
// half of AckWait, at most 5s, at least 1s: the client's floor, so this holds for an
// AckWait of 2s and more) and the redelivery goes to a live worker.
//
// The idle heartbeat is a second at most: a pull request the server no longer holds
// (seen under load: the client waits on a pull the server shows no trace of) is
// noticed after two missed heartbeats, not after the expiry.
func pullTimes(ackWait, heartbeat time.Duration) (expiry, idle time.Duration) {
	expiry = min(max(min(ackWait/2, ackWait-heartbeat), time.Second), 5*time.Second)
	idle = max(min(time.Second, expiry/2), 500*time.Millisecond)
	return expiry, idle
}
