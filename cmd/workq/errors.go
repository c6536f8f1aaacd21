package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/kvlock"
	"github.com/workq/workq/producer"
)

// Exit codes. Scripts can tell a usage mistake from a failure.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// usageError is a mistake in the command line: a bad flag, a missing argument.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitCodeError ends the command with a given exit status, having already said why
// (or with msg to say).
type exitCodeError struct {
	code int
	msg  string
}

func (e exitCodeError) Error() string { return e.msg }

// isCobraUsage recognises cobra's own usage errors, which it returns untyped.
func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires at most", "invalid argument", "flag needs an argument", "required flag"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// explain turns library errors into messages a user can act on.
func explain(err error) error {
	switch {
	case errors.Is(err, admin.ErrNoQueue):
		return err
	case errors.Is(err, consumer.ErrIncompatible):
		return fmt.Errorf("incompatible worker settings: %v", strip(err))
	case errors.Is(err, producer.ErrInvalidName), errors.Is(err, kvlock.ErrInvalidName):
		return strip(err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("timed out waiting for the server: %v", strip(err))
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining):
		return fmt.Errorf("connection to the server closed: %v", strip(err))
	}
	return strip(err)
}

// strip removes package prefixes from library messages ("producer: ", "kvlock: ").
func strip(err error) error {
	s := err.Error()
	for _, p := range []string{"producer: ", "consumer: ", "kvlock: ", "admin: "} {
		s = strings.ReplaceAll(s, p, "")
	}
	return errors.New(s)
}
