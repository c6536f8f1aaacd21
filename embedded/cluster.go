package embedded

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Cluster is an in-process JetStream cluster: n Servers on one host, each a node
// with its own Name, client port and RoutePort, all listing each other's routes up
// front, so that a stopped node rejoins on Restart.
type Cluster struct {
	nodes  []*Server
	dir    string
	ownDir bool
}

// DefaultClusterName is the cluster name RunCluster gives its nodes unless the
// options hold a ClusterName.
const DefaultClusterName = "workq"

// RunCluster starts an n-node cluster (n ≥ 2: a single node is Run) and returns once
// a JetStream meta leader is elected and sees every node. The options apply to every
// node, except Name, Port, RoutePort and Routes, which RunCluster sets: node i is named
// workq-n<i>, on ports picked free. Node i stores under <dir>/n<i>, where dir is Dir's
// directory (kept) or a new temporary one (in tmpfs with TmpfsStore) that Close
// removes.
func RunCluster(n int, opts ...Option) (*Cluster, error) {
	if n < 2 {
		// A one-node cluster never elects a JetStream meta leader: it waits for peers.
		return nil, invalid("cluster size %d: want at least 2 nodes (one node is embedded.Run)", n)
	}
	c := newConfig(opts)
	if c.clusterName == "" {
		c.clusterName = DefaultClusterName
	}
	dir, own, err := c.storeDir("workq-cluster-")
	if err != nil {
		return nil, err
	}
	cl := &Cluster{dir: dir, ownDir: own}
	// The ports are picked free, then bound by the nodes a moment later; another
	// process can take one in between. Such a start is tried again on fresh ports.
	for try := 1; ; try++ {
		err = cl.start(c, n)
		if err == nil {
			break
		}
		cl.stopAll()
		if try == 3 || !errors.Is(err, syscall.EADDRINUSE) {
			cl.Close()
			return nil, err
		}
	}
	if err := cl.WaitForLeader(30 * time.Second); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// start picks free ports for n nodes and starts them all, each with its store under
// the cluster's directory.
func (cl *Cluster) start(c config, n int) error {
	clientPorts := make([]int, n)
	routePorts := make([]int, n)
	routes := make([]string, n)
	for i := range n {
		var err error
		if clientPorts[i], err = FreePort(c.host); err != nil {
			return err
		}
		if routePorts[i], err = FreePort(c.host); err != nil {
			return err
		}
		routes[i] = "nats://" + net.JoinHostPort(c.host, strconv.Itoa(routePorts[i]))
	}
	cl.nodes = make([]*Server, n)
	for i := range n {
		nc := c
		nc.name = fmt.Sprintf("workq-n%d", i)
		nc.port = clientPorts[i]
		nc.routePort = routePorts[i]
		nc.routes = routes
		nc.dir = filepath.Join(cl.dir, fmt.Sprintf("n%d", i))
		s, err := newServer(nc, "")
		if err != nil {
			cl.nodes = nil
			return err
		}
		cl.nodes[i] = s
	}
	// Start all nodes before waiting on any: JetStream in each waits for its peers.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, s := range cl.nodes {
		wg.Go(func() {
			if err := s.start(); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// URLs are the client URLs of every node, running or not.
func (cl *Cluster) URLs() []string {
	var u []string
	for _, s := range cl.nodes {
		u = append(u, s.URL())
	}
	return u
}

// URL is every node's client URL joined by commas, as nats.Connect takes them.
func (cl *Cluster) URL() string { return strings.Join(cl.URLs(), ",") }

// ClientOptions are the nats.Connect options carrying the credentials the nodes
// require, as Server.ClientOptions.
func (cl *Cluster) ClientOptions() []nats.Option { return cl.nodes[0].ClientOptions() }

// Server is node i.
func (cl *Cluster) Server(i int) *Server { return cl.nodes[i] }

// Node is node i's running nats-server, nil while stopped.
func (cl *Cluster) Node(i int) *server.Server { return cl.nodes[i].NATS() }

// Size is the number of nodes.
func (cl *Cluster) Size() int { return len(cl.nodes) }

// Stop shuts node i down, keeping its store.
func (cl *Cluster) Stop(i int) { cl.nodes[i].Stop() }

// Restart stops node i if it runs and starts it again with its store and ports.
func (cl *Cluster) Restart(i int) error { return cl.nodes[i].Restart() }

// WaitForLeader waits until one running node is the JetStream meta leader, every
// running node is current with it, and the leader sees every running node online
// (until then, placing a replicated stream fails with "no suitable peers").
func (cl *Cluster) WaitForLeader(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		leader, current, running, online := false, true, 0, 0
		for i := range cl.nodes {
			s := cl.Node(i)
			if s == nil {
				continue
			}
			running++
			if s.JetStreamIsLeader() {
				leader = true
				online = len(s.JetStreamClusterPeers())
			}
			current = current && s.JetStreamIsCurrent()
		}
		if leader && current && online >= running {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w within %s", ErrNoLeader, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StreamLeader returns the index of the node leading stream in the global account,
// or -1 if no running node leads it.
func (cl *Cluster) StreamLeader(stream string) int {
	for i := range cl.nodes {
		if s := cl.Node(i); s != nil && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// StoreDir is the directory holding every node's store (node i under n<i>).
func (cl *Cluster) StoreDir() string { return cl.dir }

// Close stops every node and removes the cluster's store if RunCluster created it.
func (cl *Cluster) Close() {
	cl.stopAll()
	if cl.ownDir {
		_ = os.RemoveAll(cl.dir)
	}
}

func (cl *Cluster) stopAll() {
	for _, s := range cl.nodes {
		if s != nil {
			s.Stop()
		}
	}
}
