//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsNode is one nats-server process: its config file, store and ports stay the same
// across crashes and restarts.
type natsNode struct {
	name   string
	dir    string // its store and log live here
	port   int
	cport  int // cluster port; 0 for a single server
	routes []int
	p      *proc
}

// newNodes lays out n nodes under dir: one standalone server for n == 1, else a cluster
// with routes between all of them. Everything listens on 127.0.0.1 only.
func newNodes(t testing.TB, dir string, n int) []*natsNode {
	t.Helper()
	ports := freePorts(t, 2*n)
	nodes := make([]*natsNode, n)
	var routes []int
	if n > 1 {
		routes = ports[n:]
	}
	for i := range nodes {
		nd := &natsNode{name: fmt.Sprintf("n%d", i+1), dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), port: ports[i], routes: routes}
		if n > 1 {
			nd.cport = ports[n+i]
		}
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(nd.confPath(), []byte(nd.config()), 0o644); err != nil {
			t.Fatal(err)
		}
		nodes[i] = nd
	}
	return nodes
}

func (n *natsNode) confPath() string { return filepath.Join(n.dir, "nats.conf") }
func (n *natsNode) url() string      { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

// config is the node's nats-server configuration: JetStream with every write fsynced.
func (n *natsNode) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server_name: %s\nlisten: 127.0.0.1:%d\n", n.name, n.port)
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", filepath.Join(n.dir, "js"))
	if n.cport != 0 {
		var rs []string
		for _, p := range n.routes {
			if p != n.cport {
				rs = append(rs, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
			}
		}
		fmt.Fprintf(&b, "cluster {\n  name: chaos\n  listen: 127.0.0.1:%d\n  no_advertise: true\n  routes: [%s]\n}\n", n.cport, strings.Join(rs, ", "))
	}
	return b.String()
}

// start runs the node's nats-server and waits until its client port accepts connections.
func (n *natsNode) start(t testing.TB) {
	t.Helper()
	n.p = spawn(t, n.name, filepath.Join(n.dir, "server.log"), nil, natsBin, "-c", n.confPath())
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
	waitUntil(t, 30*time.Second, n.name+" to listen on "+addr, func() bool {
		if n.p.exited() {
			t.Fatalf("nats-server %s exited: %v; log in %s", n.name, n.p.err, filepath.Join(n.dir, "server.log"))
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// crash SIGKILLs the node's nats-server.
func (n *natsNode) crash(t testing.TB) { n.p.crash(t) }

func urls(nodes []*natsNode) string {
	var us []string
	for _, n := range nodes {
		us = append(us, n.url())
	}
	return strings.Join(us, ",")
}

// connectOptions make a connection that reconnects forever, fast: the test's and its
// worker processes' (workerproc_test.go).
func connectOptions() []nats.Option {
	return []nats.Option{
		nats.MaxReconnects(-1), nats.ReconnectWait(20 * time.Millisecond), nats.RetryOnFailedConnect(true),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
	}
}

// connect connects the test to the servers; the connection reconnects forever, fast.
func connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, append(connectOptions(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// waitJetStream waits until JetStream answers on js (for a cluster: a meta leader exists).
func waitJetStream(t testing.TB, js jetstream.JetStream, d time.Duration) {
	t.Helper()
	waitUntil(t, d, "JetStream to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
}
