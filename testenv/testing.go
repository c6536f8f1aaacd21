package testenv

import (
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/embedded"
)

// defaults are the options every test server starts with, before the test's own: the
// store in tmpfs (embedded.TmpfsStore), since a test never needs its data on disk
// and writes to RAM are faster; the server's log on stderr when the environment
// variable WORKQ_SERVER_LOG is 1, to debug a failing test. embedded.Dir in the
// test's options puts the store on disk.
func defaults(opts []embedded.Option) []embedded.Option {
	d := []embedded.Option{embedded.TmpfsStore()}
	if os.Getenv("WORKQ_SERVER_LOG") == "1" {
		d = append(d, embedded.LogWriter(os.Stderr))
	}
	return append(d, opts...)
}

// Env is a single embedded server tied to a test.
type Env struct {
	*embedded.Server
}

// Start runs a single embedded server for the test, with its store in tmpfs unless
// opts say otherwise, and closes it, removing its store, when the test ends. It
// fails the test if the server cannot start.
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
	return connect(t, e.URL(), append(e.ClientOptions(), opts...)...)
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
// opts say otherwise, and returns once it has a JetStream meta leader; it is closed
// and its store removed when the test ends.
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
	return connect(t, c.URL(), append(c.ClientOptions(), opts...)...)
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
