package testenv

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Env is a single embedded server tied to a test.
type Env struct {
	*Server
}

// Start runs a single embedded server for the test and stops it, removing its
// store, when the test ends. It fails the test if the server cannot start.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	s, err := Run(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &Env{Server: s}
}

// Restart restarts the server (same port and store), failing the test on error.
func (e *Env) Restart(t testing.TB) {
	t.Helper()
	if err := e.Server.Restart(); err != nil {
		t.Fatal(err)
	}
}

// Conn connects to the server with the credentials it was started with, reconnecting
// forever every 50ms; the connection is closed when the test ends. A server that is
// stopped (Stop) is connected to once it is back.
func (e *Env) Conn(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	if e.opts.Username != "" {
		opts = append([]nats.Option{nats.UserInfo(e.opts.Username, e.opts.Password)}, opts...)
	}
	return connect(t, e.URL(), opts...)
}

// JetStream returns a JetStream context on a new connection from Conn.
func (e *Env) JetStream(t testing.TB, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	return newJS(t, e.Conn(t, opts...))
}

// TestCluster is an in-process cluster tied to a test.
type TestCluster struct {
	*Cluster
}

// StartCluster runs an n-node cluster for the test and returns once it has a
// JetStream meta leader; it is stopped and removed when the test ends.
func StartCluster(t testing.TB, n int, opts ...Option) *TestCluster {
	t.Helper()
	cl, err := RunCluster(n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &TestCluster{Cluster: cl}
}

// Restart restarts node i, failing the test on error.
func (c *TestCluster) Restart(t testing.TB, i int) {
	t.Helper()
	if err := c.Cluster.Restart(i); err != nil {
		t.Fatal(err)
	}
}

// Conn connects to any node of the cluster, reconnecting forever; closed when the
// test ends.
func (c *TestCluster) Conn(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	if u := c.opts[0].Username; u != "" {
		opts = append([]nats.Option{nats.UserInfo(u, c.opts[0].Password)}, opts...)
	}
	return connect(t, c.URL(), opts...)
}

// JetStream returns a JetStream context on a new connection from Conn.
func (c *TestCluster) JetStream(t testing.TB, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	return newJS(t, c.Conn(t, opts...))
}

func connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	base := []nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50 * time.Millisecond),
		nats.ReconnectJitter(0, 0),
		nats.RetryOnFailedConnect(true),
		nats.Timeout(5 * time.Second),
	}
	nc, err := nats.Connect(url, append(base, opts...)...)
	if err != nil {
		t.Fatalf("testenv: connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func newJS(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("testenv: jetstream: %v", err)
	}
	return js
}

// StartProxy runs a fault-injection Proxy to target for the test.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
