// Package retry retries calls to a server that is not reachable yet: a client
// started before its server, a cluster electing a leader.
package retry

import (
	"context"
	"errors"
	"time"

	"github.com/workq/workq/internal/jserr"
)

// Do calls op until it succeeds, fails with an error that retrying cannot fix, or
// ctx ends. Errors that mean the server or JetStream is not reachable yet (no
// responders, timeouts, a connection that is reconnecting, a cluster without a leader)
// are retried with a short capped backoff, so that a client started before its server
// simply waits for it, as long as its context allows. Each try gets at most 5s.
func Do(ctx context.Context, op func(ctx context.Context) error) error {
	return DoEach(ctx, 5*time.Second, op)
}

// DoEach is Do with each try bounded by perTry. Callers whose context is short
// (a few seconds) and whose op tolerates a try that landed with its reply lost use it
// with a fraction of that context: a request sent to a node that just failed never
// gets its reply, and a try that waits out the whole context leaves no time for one
// that reaches the newly elected leader.
func DoEach(ctx context.Context, perTry time.Duration, op func(ctx context.Context) error) error {
	delay := 20 * time.Millisecond
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, perTry)
		err := op(attemptCtx)
		cancel()
		if err == nil || !jserr.Transient(err) {
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
