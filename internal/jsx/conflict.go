// Package jsx holds small JetStream helpers shared by workq's packages: error
// classification, name checks and waiting for a server.
package jsx

import (
	"errors"

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
