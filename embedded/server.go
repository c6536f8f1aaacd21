// Package embedded runs an embedded nats-server with JetStream: a single node or an
// in-process cluster, for programs (`workq server`) and, through testenv, for tests.
package embedded

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Option configures an embedded server.
type Option func(*config)

type config struct {
	host       string
	port       int
	dir        string
	syncAlways bool
	memory     bool
	user, pass string
	logging    bool
}

// SyncAlways makes the server fsync every write (sync_interval: always). Slower, but an
// acknowledged publish survives a power failure. The default fsyncs every 2 minutes.
func SyncAlways() Option { return func(c *config) { c.syncAlways = true } }

// MemoryStore puts the temporary store directory in a RAM-backed tmpfs, /dev/shm,
// where the machine has one (else in the ordinary temporary directory, on disk).
//
// It is not JetStream memory storage: the server still runs its file store, and
// every stream keeps the storage type it asks for. File-storage streams are written
// to files that happen to live in RAM, so writes and fsyncs cost no disk I/O, their
// data survives Restart (and Stop, until Close removes the directory), and nothing
// survives a reboot. It has no effect together with Dir. Default off: the store is
// a new directory under os.TempDir.
func MemoryStore() Option { return func(c *config) { c.memory = true } }

// UserPassword requires clients to authenticate with this user and password.
func UserPassword(user, password string) Option {
	return func(c *config) { c.user, c.pass = user, password }
}

// Port sets the client port. The default, 0, picks a free port once and keeps it
// across Restart so that connected clients reconnect.
func Port(port int) Option { return func(c *config) { c.port = port } }

// Host sets the listen address. Default 127.0.0.1: nothing outside the machine can reach it.
func Host(host string) Option { return func(c *config) { c.host = host } }

// Dir sets the JetStream store directory (for a cluster, node i stores under
// dir/n<i>). Default: a new temporary directory, removed by Close. A directory given
// here is kept, so its data survives.
func Dir(dir string) Option { return func(c *config) { c.dir = dir } }

// Logging sends the server's own log to stderr. Default off; the environment
// variable WORKQ_SERVER_LOG=1 turns it on too.
func Logging() Option { return func(c *config) { c.logging = true } }

// Server is one embedded nats-server with JetStream enabled.
type Server struct {
	mu      sync.Mutex
	opts    server.Options
	srv     *server.Server
	ownDir  bool
	logging bool
}

// Run starts a single embedded server and returns once it accepts connections.
// Close stops it and removes a temporary store.
func Run(opts ...Option) (*Server, error) {
	c := config{host: "127.0.0.1"}
	for _, o := range opts {
		o(&c)
	}
	s := &Server{logging: c.logging || os.Getenv("WORKQ_SERVER_LOG") == "1"}
	dir, own, err := c.storeDir("workq-js-")
	if err != nil {
		return nil, err
	}
	c.dir, s.ownDir = dir, own
	if c.port == 0 {
		p, err := FreePort(c.host)
		if err != nil {
			if own {
				_ = os.RemoveAll(dir)
			}
			return nil, err
		}
		c.port = p
	}
	s.opts = server.Options{
		Host:       c.host,
		Port:       c.port,
		JetStream:  true,
		StoreDir:   c.dir,
		SyncAlways: c.syncAlways,
		Username:   c.user,
		Password:   c.pass,
		NoSigs:     true,
	}
	if err := s.start(); err != nil {
		s.cleanup()
		return nil, err
	}
	return s, nil
}

// storeDir returns the store directory the options ask for: Dir's, kept (own false),
// or a new temporary one named pattern, in tmpfs with MemoryStore, that the caller
// removes on Close (own true).
func (c *config) storeDir(pattern string) (dir string, own bool, err error) {
	if c.dir != "" {
		return c.dir, false, nil
	}
	base := ""
	if c.memory {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			base = "/dev/shm"
		}
	}
	d, err := os.MkdirTemp(base, pattern)
	if err != nil {
		return "", false, fmt.Errorf("embedded: store directory: %w", err)
	}
	return d, true, nil
}

func (s *Server) start() error {
	srv, err := startServer(s.opts, s.logging)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	return nil
}

// startServer starts a server with opts and waits until it accepts connections.
func startServer(opts server.Options, logging bool) (*server.Server, error) {
	o := opts // NewServer keeps a pointer; every start gets its own copy.
	o.NoLog = !logging
	srv, err := server.NewServer(&o)
	if err != nil {
		return nil, fmt.Errorf("embedded: configure nats-server: %w", err)
	}
	if logging {
		srv.ConfigureLogger()
	}
	srv.Start()
	if !srv.ReadyForConnections(20 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded: nats-server on %s:%d not ready within 20s", o.Host, o.Port)
	}
	return srv, nil
}

// URL is the client URL, nats://host:port; it stays the same across Restart.
func (s *Server) URL() string {
	return "nats://" + net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port))
}

// StoreDir is the JetStream store directory.
func (s *Server) StoreDir() string { return s.opts.StoreDir }

// UserPassword returns the user and password clients must present, empty without.
func (s *Server) UserPassword() (user, password string) { return s.opts.Username, s.opts.Password }

// NATS is the running nats-server, nil while stopped.
func (s *Server) NATS() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Stop shuts the server down, keeping its store; Restart brings it back.
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

// Restart stops the server if it runs and starts it again on the same port with the
// same store, so clients reconnect and JetStream data on file storage survives.
func (s *Server) Restart() error {
	s.Stop()
	return s.start()
}

// Close stops the server and removes its store if Run created it.
func (s *Server) Close() {
	s.Stop()
	s.cleanup()
}

func (s *Server) cleanup() {
	if s.ownDir {
		_ = os.RemoveAll(s.opts.StoreDir)
	}
}

// FreePort returns a TCP port on host that was free a moment ago.
func FreePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("embedded: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func mustURL(host string, port int) *url.URL {
	return &url.URL{Scheme: "nats", Host: net.JoinHostPort(host, strconv.Itoa(port))}
}

var errNoLeader = errors.New("embedded: no JetStream meta leader")
