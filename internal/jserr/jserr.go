// Package jserr classifies the errors JetStream returns: a lost compare-and-set, a
// server that is not reachable right now, an API error code. Every package that
// decides between "retry", "conflict" and "give up" asks here, so they all decide
// alike.
package jserr

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// IsConflict reports whether err is a compare-and-set conflict: a KV Create over a
// live key, a KV Update/Delete with a stale revision, or a publish whose expected
// last sequence did not match. Replicated streams report such conflicts with error
// code 10164 where single replicas say 10071; both are conflicts.
func IsConflict(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return true
		}
	}
	return false
}

// HasCode reports whether err carries the JetStream API error code.
func HasCode(err error, code jetstream.ErrorCode) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == code
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
