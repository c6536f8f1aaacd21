package jserr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NoLeader is true exactly for the answers that mean no leader received the
// request; a timeout (the request may have landed) and a conflict are not.
func TestNoLeader(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nats.ErrNoResponders, true},
		{fmt.Errorf("reserve: %w", jetstream.ErrNoStreamResponse), true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: notAvailable}, true},
		{fmt.Errorf("get: %w", &jetstream.APIError{Code: 500, ErrorCode: 10009}), true},
		{errors.New("nats: " + notAvailable), true}, // a direct get's status, as nats.go returns it
		{nil, false},
		{context.DeadlineExceeded, false},
		{nats.ErrTimeout, false},
		{jetstream.ErrKeyExists, false},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, false},
	} {
		if got := NoLeader(c.err); got != c.want {
			t.Errorf("NoLeader(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// Transient is true for what a retry may get past: no leader, a timeout, a lost
// connection, a publish whose message id another try is storing; not for a conflict
// or a refusal.
func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nats.ErrNoResponders, true},
		{context.DeadlineExceeded, true},
		{nats.ErrTimeout, true},
		{fmt.Errorf("publish: %w", &jetstream.APIError{Code: 503, ErrorCode: 10158, Description: "duplicate message id is in process"}), true},
		{nil, false},
		{jetstream.ErrKeyExists, false},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, false},
		{nats.ErrPermissionViolation, false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
