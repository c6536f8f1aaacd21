package main

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestConnFlagsValidate(t *testing.T) {
	t.Parallel()
	const want = "--tls-cert and --tls-key go together"
	checkValidate(t, []validateCase{
		{"no TLS", &connFlags{server: defaultServer}, ""},
		{"client certificate", &connFlags{server: defaultServer, tlsCert: "c.pem", tlsKey: "k.pem", tlsCA: "ca.pem"}, ""},
		{"CA only", &connFlags{server: defaultServer, tlsCA: "ca.pem"}, ""},
		{"certificate without key", &connFlags{server: defaultServer, tlsCert: "c.pem"}, want},
		{"key without certificate", &connFlags{server: defaultServer, tlsKey: "k.pem"}, want},
		{"host and port", &connFlags{server: "localhost:4222"}, ""},
		{"several", &connFlags{server: "nats://a:4222, tls://b:4222,ws://c:8080,WSS://d"}, ""},
		// issue 25: an http URL ended in an i/o timeout after 3 s
		{"http", &connFlags{server: "http://localhost:4222"}, "--server http://localhost:4222: not a NATS URL (http://); use nats://localhost:4222 (or tls://, ws://, wss://)"},
		{"https among others", &connFlags{server: "nats://a:4222,https://b:8222"}, "--server https://b:8222: not a NATS URL (https://); use nats://b:8222 (or tls://, ws://, wss://)"},
	})
}

// A refusal of the credentials or a TLS failure is not retried, also when it is the
// server's own text (a connection's LastError), which nats.go's errors do not match.
func TestRetryableConnect(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nats.ErrNoServers, true},
		{errors.New("dial tcp 127.0.0.1:4222: connect: connection refused"), true},
		{nats.ErrAuthorization, false},
		{nats.ErrAuthExpired, false},
		{errors.New("nats: User Authentication Expired"), false},
		{errors.New("nats: User Authentication Revoked"), false},
		{errors.New("nats: Account Authentication Expired"), false},
		{fmt.Errorf("%w: connection closed by remote after TLS handshake: %w", nats.ErrTLS, syscall.EPIPE), false},
		{nats.ErrSecureConnWanted, false},
	} {
		if got := retryableConnect(c.err); got != c.want {
			t.Errorf("retryableConnect(%q) = %v, want %v", c.err, got, c.want)
		}
	}
}
