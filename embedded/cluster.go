package embedded

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is an in-process JetStream cluster of n nodes on loopback. Every node's
// routes are fixed up front, so a stopped node rejoins on Restart.
type Cluster struct {
	mu      sync.Mutex
	opts    []server.Options
	nodes   []*server.Server
	dir     string
	ownDir  bool
	logging bool
}

// RunCluster starts an n-node cluster (n ≥ 2; a single node is Run) and returns once
// a JetStream meta leader is elected and every node is current. The store options
// apply as for Run: node i
// stores under <dir>/n<i>, where dir is Dir's directory (kept) or a new temporary one
// (in tmpfs with MemoryStore) that Close removes.
func RunCluster(n int, opts ...Option) (*Cluster, error) {
	if n < 2 {
		// A one-node cluster never elects a JetStream meta leader: it waits for peers.
		return nil, fmt.Errorf("testenv: cluster size %d: need at least 2 nodes (one node is embedded.Run)", n)
	}
	c := config{host: "127.0.0.1"}
	for _, o := range opts {
		o(&c)
	}
	dir, own, err := c.storeDir("workq-cluster-")
	if err != nil {
		return nil, err
	}
	cl := &Cluster{dir: dir, ownDir: own, logging: c.logging || os.Getenv("WORKQ_SERVER_LOG") == "1"}
	// The ports are picked free, then bound by the nodes a moment later; another
	// process (a parallel test package's server) can take one in between, and that
	// node never gets ready. Such a start is tried again on fresh ports.
	for try := 1; ; try++ {
		err = cl.start(c, n)
		if err == nil {
			break
		}
		for i := range cl.nodes {
			cl.Stop(i)
		}
		if try == 3 {
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
	var routes []*url.URL
	var err error
	for i := range n {
		if clientPorts[i], err = FreePort(c.host); err != nil {
			return err
		}
		if routePorts[i], err = FreePort(c.host); err != nil {
			return err
		}
		routes = append(routes, mustURL(c.host, routePorts[i]))
	}
	cl.opts = nil
	for i := range n {
		cl.opts = append(cl.opts, server.Options{
			ServerName: fmt.Sprintf("workq-n%d", i),
			Host:       c.host,
			Port:       clientPorts[i],
			JetStream:  true,
			StoreDir:   filepath.Join(cl.dir, fmt.Sprintf("n%d", i)),
			SyncAlways: c.syncAlways,
			Username:   c.user,
			Password:   c.pass,
			NoSigs:     true,
			Cluster: server.ClusterOpts{
				Name: "workq-test",
				Host: c.host,
				Port: routePorts[i],
			},
			Routes: routes,
		})
	}
	cl.nodes = make([]*server.Server, n)
	// Start all nodes before waiting on any: a node is ready for clients only once
	// JetStream has a quorum.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl.nodes[i], errs[i] = startServer(cl.opts[i], cl.logging)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// URLs are the client URLs of every node, running or not.
func (cl *Cluster) URLs() []string {
	var u []string
	for _, o := range cl.opts {
		u = append(u, mustURL(o.Host, o.Port).String())
	}
	return u
}

// URL is every node's client URL joined by commas, as nats.Connect takes them.
func (cl *Cluster) URL() string { return strings.Join(cl.URLs(), ",") }

// UserPassword returns the user and password clients must present, empty without.
func (cl *Cluster) UserPassword() (user, password string) {
	return cl.opts[0].Username, cl.opts[0].Password
}

// Node is node i's running server, nil while stopped.
func (cl *Cluster) Node(i int) *server.Server {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.nodes[i]
}

// Size is the number of nodes.
func (cl *Cluster) Size() int { return len(cl.opts) }

// Stop shuts node i down, keeping its store.
func (cl *Cluster) Stop(i int) {
	cl.mu.Lock()
	srv := cl.nodes[i]
	cl.nodes[i] = nil
	cl.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart stops node i if it runs and starts it again with its store and ports.
func (cl *Cluster) Restart(i int) error {
	cl.Stop(i)
	srv, err := startServer(cl.opts[i], cl.logging)
	if err != nil {
		return err
	}
	cl.mu.Lock()
	cl.nodes[i] = srv
	cl.mu.Unlock()
	return nil
}

// WaitForLeader waits until one running node is the JetStream meta leader, every
// running node is current with it, and the leader sees every running node online
// (until then, placing a replicated stream fails with "no suitable peers").
func (cl *Cluster) WaitForLeader(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		leader, current, running, online := false, true, 0, 0
		cl.mu.Lock()
		for _, s := range cl.nodes {
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
		cl.mu.Unlock()
		if leader && current && online >= running {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w within %s", errNoLeader, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StreamLeader returns the index of the node leading stream in the global account,
// or -1 if no running node leads it.
func (cl *Cluster) StreamLeader(stream string) int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for i, s := range cl.nodes {
		if s != nil && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// StoreDir is the directory holding every node's store (node i under n<i>).
func (cl *Cluster) StoreDir() string { return cl.dir }

// Close stops every node and removes the cluster's store if RunCluster created it.
func (cl *Cluster) Close() {
	for i := range cl.nodes {
		cl.Stop(i)
	}
	if cl.ownDir {
		_ = os.RemoveAll(cl.dir)
	}
}
