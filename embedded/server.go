package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ReadyTimeout is how long Run and Restart wait for a started server to accept
// connections before they give up: long enough for a loaded machine, short enough
// that a server which will never be ready is reported.
const ReadyTimeout = 20 * time.Second

// Server is one embedded nats-server with JetStream enabled: a single server, or one
// node of a cluster (ClusterName).
type Server struct {
	opts   server.Options // settled by the first start (ports), then fixed
	logger *slog.Logger
	ownDir bool

	mu  sync.Mutex
	srv *server.Server
}

// Run starts an embedded server and returns once it accepts connections. Close
// stops it and removes a temporary store. A bad option is an error wrapping
// ErrInvalidOption; a port already taken, one wrapping syscall.EADDRINUSE.
func Run(opts ...Option) (*Server, error) {
	s, err := newServer(newConfig(opts), "workq-js-")
	if err != nil {
		return nil, err
	}
	if err := s.start(); err != nil {
		s.removeStore()
		return nil, err
	}
	return s, nil
}

// newServer checks c and prepares a server on the store it asks for (a new
// temporary directory named pattern unless Dir), without starting it.
func newServer(c config, pattern string) (*Server, error) {
	o, err := c.serverOptions()
	if err != nil {
		return nil, err
	}
	dir, own, err := c.storeDir(pattern)
	if err != nil {
		return nil, err
	}
	o.StoreDir = dir
	l := c.logger
	if l != nil && c.name != "" {
		l = l.With("server", c.name)
	}
	return &Server{opts: o, logger: l, ownDir: own}, nil
}

// start starts the server and waits until it accepts connections. The first start
// fixes the ports the system picked, so that every Restart listens on the same ones.
func (s *Server) start() error {
	o := s.opts // NewServer keeps a pointer: every start gets its own copy
	srv, err := server.NewServer(&o)
	if err != nil {
		return fmt.Errorf("embedded: configure nats-server: %w", err)
	}
	log := &serverLog{l: s.logger}
	srv.SetLoggerV2(log, log.enabled(slog.LevelDebug), log.enabled(LevelTrace), false)
	srv.Start()
	if err := waitReady(srv, log); err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		where := s.addr()
		if s.opts.Port == server.RANDOM_PORT {
			where = s.opts.Host + " (on a free port)"
		}
		return fmt.Errorf("embedded: start nats-server on %s: %w", where, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv = srv
	if s.opts.Port == server.RANDOM_PORT {
		s.opts.Port = srv.Addr().(*net.TCPAddr).Port
	}
	if s.opts.Cluster.Port == server.RANDOM_PORT {
		s.opts.Cluster.Port = srv.ClusterAddr().Port
	}
	return nil
}

// waitReady waits until srv accepts connections, or logs a fatal error (which
// nats-server does instead of returning one: a port taken, a store it cannot open).
func waitReady(srv *server.Server, log *serverLog) error {
	deadline := time.Now().Add(ReadyTimeout)
	for {
		ready := srv.ReadyForConnections(50 * time.Millisecond)
		if err := log.fatalErr(); err != nil {
			if op, ok := errors.AsType[*net.OpError](err); ok {
				return op // "listen tcp 127.0.0.1:4222: bind: address already in use"
			}
			return err
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready for connections within %s", ReadyTimeout)
		}
	}
}

// addr is the client address, host:port (port 0 until the system has picked one).
func (s *Server) addr() string {
	return net.JoinHostPort(s.opts.Host, strconv.Itoa(max(s.opts.Port, 0)))
}

// URL is the client URL, nats://host:port (tls://host:port with TLS, so that clients
// insist on it); it stays the same across Restart.
func (s *Server) URL() string {
	scheme := "nats://"
	if s.opts.TLSConfig != nil {
		scheme = "tls://"
	}
	return scheme + s.addr()
}

// RouteURL is the URL other cluster nodes list in Routes to reach this one,
// nats://host:routeport, or "" for a server that is not a cluster node.
func (s *Server) RouteURL() string {
	if s.opts.Cluster.Name == "" {
		return ""
	}
	return "nats://" + net.JoinHostPort(s.opts.Cluster.Host, strconv.Itoa(max(s.opts.Cluster.Port, 0)))
}

// ClientOptions are the nats.Connect options carrying the credentials the server
// requires (UserPassword or Token), none without. A client of a TLS server also needs
// to trust its certificate (nats.RootCAs or nats.Secure): the server cannot tell it
// what signed that.
func (s *Server) ClientOptions() []nats.Option {
	switch {
	case s.opts.Authorization != "":
		return []nats.Option{nats.Token(s.opts.Authorization)}
	case s.opts.Username != "":
		return []nats.Option{nats.UserInfo(s.opts.Username, s.opts.Password)}
	}
	return nil
}

// StoreDir is the JetStream store directory.
func (s *Server) StoreDir() string { return s.opts.StoreDir }

// NATS is the running nats-server, for what this package does not wrap (monitoring,
// account and JetStream state); nil while stopped.
func (s *Server) NATS() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Stop shuts the server down and waits until it is down, keeping its store; Restart
// brings it back. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart stops the server if it runs and starts it again on the same ports with the
// same store, so clients reconnect and JetStream data on file storage survives.
func (s *Server) Restart() error {
	s.Stop()
	return s.start()
}

// Close stops the server and removes its store if Run created it (no Dir).
func (s *Server) Close() {
	s.Stop()
	s.removeStore()
}

func (s *Server) removeStore() {
	if s.ownDir {
		_ = os.RemoveAll(s.opts.StoreDir)
	}
}

// FreePort returns a TCP port on host that was free a moment ago, for a server
// whose port must be known before it starts (another process may take it
// meanwhile: Run then fails with syscall.EADDRINUSE).
func FreePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("embedded: find a free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
