// Package testenv ties embedded nats-servers (package embedded) to tests: Start and
// StartCluster run a single server or an in-process cluster for a test and close it
// when the test ends, Conn and JetStream connect to it, StartProxy puts a
// fault-injection proxy in front of it, and Context, Eventually and WaitsForServer
// wait with deadlines.
//
// A test server takes embedded's options (testenv.Start(t, embedded.SyncAlways()));
// unlike embedded.Run, its store is in tmpfs by default (embedded.MemoryStore),
// because a test never needs its data on disk.
package testenv

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/embedded"
	"github.com/workq/workq/internal/faultproxy"
)

// defaults are the options every test server starts with, before the test's own: the
// store in tmpfs (embedded.MemoryStore), since a test never needs its data on disk
// and writes to RAM are faster. embedded.Dir in the test's options puts the store on
// disk.
func defaults(opts []embedded.Option) []embedded.Option {
	return append([]embedded.Option{embedded.MemoryStore()}, opts...)
}

// Env is a single embedded server tied to a test.
type Env struct {
	*embedded.Server
}

// Start runs a single embedded server for the test, with its store in tmpfs unless
// opts say otherwise, and stops it, removing its store, when the test ends. It fails the test if the server cannot start.
func Start(t testing.TB, opts ...embedded.Option) *Env {
	t.Helper()
	s, err := embedded.Run(defaults(opts)...)
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
	if u, p := e.UserPassword(); u != "" {
		opts = append([]nats.Option{nats.UserInfo(u, p)}, opts...)
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
	*embedded.Cluster
}

// StartCluster runs an n-node cluster for the test, with its stores in tmpfs unless
// opts say otherwise, and returns once it has a JetStream meta leader; it is stopped
// and removed when the test ends.
func StartCluster(t testing.TB, n int, opts ...embedded.Option) *TestCluster {
	t.Helper()
	cl, err := embedded.RunCluster(n, defaults(opts)...)
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
	if u, p := c.UserPassword(); u != "" {
		opts = append([]nats.Option{nats.UserInfo(u, p)}, opts...)
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

// Proxy is a TCP proxy in front of a server for fault injection (see
// faultproxy.Proxy): Pause stalls the link, Resume lets it flow, Cut closes it.
type Proxy = faultproxy.Proxy

// StartProxy runs a fault-injection Proxy to target for the test.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
