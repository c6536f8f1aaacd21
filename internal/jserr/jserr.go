// Package jserr classifies the errors JetStream returns: a lost compare-and-set, a
// server that is not reachable right now, an API error code. Every package that
// decides between "retry", "conflict" and "give up" asks here, so they all decide
// alike.
package jserr

import (
	"context"
	"errors"
	"strings"

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

// NoLeader reports whether err says that no leader received the request, so that
// it changed nothing: no responders (nats.go's ErrNoStreamResponse for a publish),
// or the server's "temporarily unavailable" (10008) or "not leader" (10009) for an
// API request. A stream or consumer has no leader right after it is created, and
// while its replicas elect a new one. A direct get that a replica cannot answer
// meanwhile comes back as a status without a code, which nats.go turns into an
// error carrying only the server's description of 10008.
func NoLeader(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		HasCode(err, 10008) || HasCode(err, 10009) ||
		(err != nil && strings.HasSuffix(err.Error(), notAvailable))
}

// notAvailable is the server's description of error 10008.
const notAvailable = "JetStream system temporarily unavailable"

// Transient reports whether err means "not reachable right now" rather than "wrong".
// A publish refused because another with its message id is being stored (10158: a
// replicated stream still storing an earlier try of the same publish, after a leader
// change) is transient too: the next try is answered as a duplicate, or stored.
func Transient(err error) bool {
	switch {
	case NoLeader(err), errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled), HasCode(err, msgIDInProcess):
		return true
	}
	return false
}

// msgIDInProcess is the server's "duplicate message id is in process".
const msgIDInProcess = 10158
