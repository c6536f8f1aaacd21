package embedded

import (
	"crypto/tls"
	"io"
	"log/slog"
)

// Option configures an embedded server. Options are checked when Run or RunCluster
// starts the server: a bad value is an error wrapping ErrInvalidOption.
type Option func(*config)

// config is what the options ask for; serverOptions turns it into nats-server's.
type config struct {
	host       string
	port       int
	dir        string
	tmpfs      bool
	syncAlways bool

	user, password string
	token          string

	tlsConfig       *tls.Config
	tlsCert, tlsKey string

	name        string
	clusterName string
	routePort   int
	routes      []string

	maxMemory, maxStore int64

	configFile string

	logger *slog.Logger
}

func newConfig(opts []Option) config {
	c := config{host: DefaultHost}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// DefaultHost is where the server listens unless Host says otherwise: loopback, so
// that nothing outside the machine reaches a server started without thinking about it.
const DefaultHost = "127.0.0.1"

// Host sets the address the server listens on, for clients and (with ClusterName)
// for routes. Default DefaultHost, 127.0.0.1: only this machine can connect; "0.0.0.0"
// listens on every interface.
func Host(host string) Option { return func(c *config) { c.host = host } }

// Port sets the client port. The default, 0, lets the system pick a free port when
// the server first starts; Restart keeps it, so that connected clients reconnect.
func Port(port int) Option { return func(c *config) { c.port = port } }

// Dir sets the JetStream store directory, which is kept: its data survives Close
// and the process. For a cluster, node i stores under dir/n<i>. Default: a new
// temporary directory (see TmpfsStore) that Close removes, because a server started
// without a directory is a scratch server.
func Dir(dir string) Option { return func(c *config) { c.dir = dir } }

// TmpfsStore puts the temporary store directory in a RAM-backed tmpfs, /dev/shm,
// where the machine has one (else in the ordinary temporary directory, on disk).
//
// It is not JetStream memory storage: the server still runs its file store, and
// every stream keeps the storage type it asks for. File-storage streams are written
// to files that happen to live in RAM, so writes and fsyncs cost no disk I/O, their
// data survives Restart (and Stop, until Close removes the directory), and nothing
// survives a reboot. It has no effect together with Dir. Default off: the store is a
// new directory under os.TempDir, on disk, as a server whose data matters needs.
func TmpfsStore() Option { return func(c *config) { c.tmpfs = true } }

// SyncAlways makes the server fsync every write (sync_interval: always). Slower, but
// an acknowledged publish survives a power failure. Default off: nats-server's own
// default, an fsync every 2 minutes, much faster, where a power failure can lose the
// last acknowledged writes (replicas on other machines guard against that instead).
func SyncAlways() Option { return func(c *config) { c.syncAlways = true } }

// MaxMemory caps what JetStream may keep in memory-storage streams, in bytes.
// Default: nats-server's, 75% of the machine's memory; a small deployment sharing its
// machine with other programs sets a lower cap.
func MaxMemory(bytes int64) Option { return func(c *config) { c.maxMemory = bytes } }

// MaxStore caps what JetStream may keep in file-storage streams, in bytes. Default:
// nats-server's, 75% of the free space of the store's disk (at most 1 TB).
func MaxStore(bytes int64) Option { return func(c *config) { c.maxStore = bytes } }

// UserPassword requires every client to authenticate with this user and password.
// Default: no authentication, which suits a server on loopback only. It cannot be
// combined with Token.
func UserPassword(user, password string) Option {
	return func(c *config) { c.user, c.password = user, password }
}

// Token requires every client to authenticate with this token. Default: no
// authentication. It cannot be combined with UserPassword.
func Token(token string) Option { return func(c *config) { c.token = token } }

// TLS makes clients connect with TLS, using cfg (cloned; it must hold a certificate,
// or GetCertificate, unless TLSFiles adds one). Default: no TLS, which suits
// loopback; a server other machines reach needs it. Routes between cluster nodes stay
// plain TCP: keep the route port on a private network.
func TLS(cfg *tls.Config) Option { return func(c *config) { c.tlsConfig = cfg } }

// TLSFiles makes clients connect with TLS, with the certificate and private key in
// these PEM files (read once, at Run). Together with TLS, the certificate is added to
// that config. Default: no TLS.
func TLSFiles(certFile, keyFile string) Option {
	return func(c *config) { c.tlsCert, c.tlsKey = certFile, keyFile }
}

// ConfigFile reads a nats-server configuration file for what the other options do
// not set: users, permissions, accounts, an operator and its JWT resolver, TLS
// (client certificates included), limits. The options keep what they own: the listen
// address and port, the store, fsync, clustering and logging, and JetStream is always
// on (accounts of the file need `jetstream: enabled` to use it). Auth or TLS in the
// file cannot be combined with UserPassword, Token, TLS or TLSFiles. Default: none.
func ConfigFile(path string) Option { return func(c *config) { c.configFile = path } }

// Name sets the server's name, which JetStream peers know it by: a cluster node needs
// one, the same across restarts. Default: the server's generated id, new at each
// start, which suits a single server.
func Name(name string) Option { return func(c *config) { c.name = name } }

// ClusterName makes the server a cluster node: it listens for routes from the other
// nodes (RoutePort) and connects to theirs (Routes), and JetStream replicates across
// the nodes. Every node of a cluster has the same cluster name and its own Name.
// Default: no cluster, a single server.
func ClusterName(name string) Option { return func(c *config) { c.clusterName = name } }

// RoutePort sets the port a cluster node listens on for routes from the other nodes
// (nats-server's usual one is 6222). The default, 0, lets the system pick a free port
// when the node first starts, kept across Restart (RouteURL tells it); the other
// nodes' Routes must name it, so a cluster whose nodes start together picks its route
// ports first (FreePort). Needs ClusterName.
func RoutePort(port int) Option { return func(c *config) { c.routePort = port } }

// Routes are the route URLs (nats://host:port, or host:port alone, the nodes'
// RoutePort) a cluster node connects to. A JetStream cluster node needs them (nats-server will not start one
// without): give every node the same list of all the nodes, its own URL included,
// which it ignores. No default. Needs ClusterName.
func Routes(urls ...string) Option {
	return func(c *config) { c.routes = append([]string(nil), urls...) }
}

// Logger sends the server's log to l: notices at Info, warnings at Warn, errors and
// fatal errors at Error, debug lines at Debug and protocol traces at LevelTrace, each
// only when l is enabled for its level. Default: none, the server logs nothing,
// because an embedded server shares its process's output and a library must not
// write there uninvited.
func Logger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// LogWriter sends the server's log, from Info up, to w as slog text lines. Default:
// none (see Logger).
func LogWriter(w io.Writer) Option {
	return Logger(slog.New(slog.NewTextHandler(w, nil)))
}

// LevelTrace is the slog level of the server's protocol traces (every message in and
// out, very verbose): a Logger enabled for it receives them.
const LevelTrace = slog.LevelDebug - 4
