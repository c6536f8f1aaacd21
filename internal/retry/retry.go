// Package retry retries calls to a server that is not reachable yet: a client
// started before its server, a cluster electing a leader. It tells those apart from
// a request the server refused for the user's permissions, which gets no answer
// either.
package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/jserr"
)

// Do calls op until it succeeds, fails with an error that retrying cannot fix, or
// ctx ends. Errors that mean the server or JetStream is not reachable yet (no
// responders, timeouts, a connection that is reconnecting, a cluster without a leader)
// are retried with a short capped backoff, so that a client started before its server
// simply waits for it, as long as its context allows. Each try gets at most 5s. With a
// connection in ctx (WithConn), a try the server refused for the user's permissions
// ends Do at once with that violation.
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
	nc, _ := ctx.Value(connKey{}).(*nats.Conn)
	for {
		var before error
		if nc != nil {
			before = nc.LastError()
		}
		attemptCtx, cancel := context.WithTimeout(ctx, perTry)
		if nc != nil {
			go cancelWhenDenied(attemptCtx, cancel, nc, before)
		}
		err := op(attemptCtx)
		cancel()
		if err == nil {
			return nil
		}
		if jserr.Transient(err) || errors.Is(err, context.Canceled) { // no answer, or cancelled by cancelWhenDenied
			if denied := Denied(nc, before); denied != nil {
				return denied
			}
		}
		if !jserr.Transient(err) {
			return err
		}
		if err := pause(ctx, &delay, err); err != nil {
			return err
		}
	}
}

// pause waits delay before the next try, then doubles it up to 500 ms. If ctx ends
// first it returns ctx's error joined with last, the error of the last try.
func pause(ctx context.Context, delay *time.Duration, last error) error {
	select {
	case <-ctx.Done():
		return errors.Join(ctx.Err(), last)
	case <-time.After(*delay):
	}
	*delay = min(*delay*2, 500*time.Millisecond)
	return nil
}

// connKey is the context key of the connection WithConn names.
type connKey struct{}

// WithConn returns ctx carrying nc, the connection the calls Do retries use, so that
// Do can tell a request the server refused from one that got no answer. The server
// drops a publish that the user's permissions deny and tells the client so only in an
// asynchronous error, which nats.go keeps as the connection's LastError: the request
// itself just times out, which Do would retry until ctx ends. With the connection,
// Do watches it during each try (every 20ms, from a goroutine of the try) and
// gives up as soon as the server refuses, with that error. Meant for setting up
// (provisioning, opening buckets), not for hot paths.
func WithConn(ctx context.Context, nc *nats.Conn) context.Context {
	if nc == nil {
		return ctx
	}
	return context.WithValue(ctx, connKey{}, nc)
}

// UntilDenied returns a context that ends with ctx, or as soon as nc receives a
// permissions violation: a one-shot command's requests then end at once instead of
// waiting for answers that will not come. Denied(nc, before), with before read
// just before, tells the cause.
func UntilDenied(ctx context.Context, nc *nats.Conn) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go cancelWhenDenied(ctx, cancel, nc, nc.LastError())
	return ctx, cancel
}

// cancelWhenDenied cancels a try as soon as nc receives a permissions violation:
// the request it waits for will get no answer.
func cancelWhenDenied(ctx context.Context, cancel context.CancelFunc, nc *nats.Conn, before error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if Denied(nc, before) != nil {
				cancel()
				return
			}
		}
	}
}

// Denied returns the permissions violation nc received since its last error was
// before (nc.LastError() read earlier), or nil. A violation is a new error value each
// time, so one received since differs from before. The error wraps
// nats.ErrPermissionViolation and names the subject the server refused.
func Denied(nc *nats.Conn, before error) error {
	if nc == nil {
		return nil
	}
	after := nc.LastError()
	if after == nil || after == before || !errors.Is(after, nats.ErrPermissionViolation) {
		return nil
	}
	return fmt.Errorf("%w (the server refused the request: this user lacks the permission; see 'workq perms')", after)
}
