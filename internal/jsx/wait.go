package jsx

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Retry calls op until it succeeds, fails with an error that retrying cannot fix, or
// ctx ends. Errors that mean the server or JetStream is not reachable yet (no
// responders, timeouts, a connection that is reconnecting, a cluster without a leader)
// are retried with a short capped backoff, so that a client started before its server
// simply waits for it, as long as its context allows. Each try gets at most 5s.
func Retry(ctx context.Context, op func(ctx context.Context) error) error {
	return RetryEach(ctx, 5*time.Second, op)
}

// RetryEach is Retry with each try bounded by perTry. Callers whose context is short
// (a few seconds) and whose op tolerates a try that landed with its reply lost use it
// with a fraction of that context: a request sent to a node that just failed never
// gets its reply, and a try that waits out the whole context leaves no time for one
// that reaches the newly elected leader.
func RetryEach(ctx context.Context, perTry time.Duration, op func(ctx context.Context) error) error {
	delay := 20 * time.Millisecond
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, perTry)
		err := op(attemptCtx)
		cancel()
		if err == nil || !Transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

// Transient reports whether err means "not reachable right now" rather than "wrong".
func Transient(err error) bool {
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return true
	}
	return HasCode(err, 10008) /* JetStream temporarily unavailable */ || HasCode(err, 10009) /* not leader */
}
