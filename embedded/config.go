package embedded

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// invalid is the error for a bad option: "embedded: <what is wrong>: invalid option
// or argument".
func invalid(format string, args ...any) error {
	return fmt.Errorf("embedded: "+format+": %w", append(args, ErrInvalidOption)...)
}

// serverOptions checks the options and turns them into nats-server's, all but the
// store directory. A port left at 0 becomes server.RANDOM_PORT: the system picks
// it when the server starts.
func (c *config) serverOptions() (server.Options, error) {
	o, err := c.fromFile()
	if err != nil {
		return o, err
	}
	o.ServerName = c.name
	o.Host, o.Port = c.host, c.port
	o.JetStream = true
	o.SyncAlways = c.syncAlways
	if c.maxMemory != 0 || c.configFile == "" {
		o.JetStreamMaxMemory = c.maxMemory
	}
	if c.maxStore != 0 || c.configFile == "" {
		o.JetStreamMaxStore = c.maxStore
	}
	o.NoLog = true  // the log goes where Logger says, set on the server
	o.NoSigs = true // signals belong to the program embedding the server
	if err := checkPort("Port", c.port); err != nil {
		return o, err
	}
	if o.Port == 0 {
		o.Port = server.RANDOM_PORT
	}
	if c.maxMemory < 0 || c.maxStore < 0 {
		return o, invalid("MaxMemory %d, MaxStore %d: want bytes, or 0 for nats-server's default", c.maxMemory, c.maxStore)
	}
	if err := c.auth(&o); err != nil {
		return o, err
	}
	if err := c.tls(&o); err != nil {
		return o, err
	}
	if err := c.cluster(&o); err != nil {
		return o, err
	}
	return o, nil
}

func checkPort(what string, port int) error {
	if port < 0 || port > 65535 {
		return invalid("%s %d: want 1 to 65535, or 0 for a free one", what, port)
	}
	return nil
}

// fromFile is the configuration file's options (ConfigFile), or none.
func (c *config) fromFile() (server.Options, error) {
	if c.configFile == "" {
		return server.Options{}, nil
	}
	f, err := server.ProcessConfigFile(c.configFile)
	if err != nil {
		return server.Options{}, fmt.Errorf("embedded: ConfigFile %s: %w: %w", c.configFile, err, ErrInvalidOption)
	}
	fileAuth := f.Username != "" || f.Authorization != "" || len(f.Users) > 0 || len(f.Nkeys) > 0 || len(f.TrustedOperators) > 0
	switch {
	case fileAuth && (c.user != "" || c.password != "" || c.token != ""):
		return server.Options{}, invalid("ConfigFile %s sets authorization: not together with UserPassword or Token", c.configFile)
	case f.TLSConfig != nil && (c.tlsConfig != nil || c.tlsCert != "" || c.tlsKey != ""):
		return server.Options{}, invalid("ConfigFile %s sets TLS: not together with TLS or TLSFiles", c.configFile)
	}
	return *f, nil
}

func (c *config) auth(o *server.Options) error {
	if c.user == "" && c.password == "" && c.token == "" {
		return nil // none, or the configuration file's
	}
	switch {
	case c.token != "" && (c.user != "" || c.password != ""):
		return invalid("UserPassword and Token: a server takes one or the other")
	case c.user == "" && c.password != "":
		return invalid("UserPassword: empty user")
	}
	o.Username, o.Password, o.Authorization = c.user, c.password, c.token
	return nil
}

func (c *config) tls(o *server.Options) error {
	if c.tlsConfig == nil && c.tlsCert == "" && c.tlsKey == "" {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.tlsConfig != nil {
		cfg = c.tlsConfig.Clone()
	}
	if c.tlsCert != "" || c.tlsKey != "" {
		if c.tlsCert == "" || c.tlsKey == "" {
			return invalid("TLSFiles(%q, %q): want both a certificate and a key file", c.tlsCert, c.tlsKey)
		}
		pair, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return fmt.Errorf("embedded: TLSFiles: load certificate %s and key %s: %w: %w", c.tlsCert, c.tlsKey, err, ErrInvalidOption)
		}
		cfg.Certificates = append(cfg.Certificates, pair)
	}
	if len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetConfigForClient == nil {
		return invalid("TLS: the config has no certificate")
	}
	o.TLSConfig = cfg
	return nil
}

func (c *config) cluster(o *server.Options) error {
	if c.clusterName == "" {
		if c.routePort != 0 || len(c.routes) > 0 {
			return invalid("RoutePort or Routes without ClusterName")
		}
		return nil
	}
	if c.name == "" {
		return invalid("ClusterName %q without Name: JetStream knows a cluster's nodes by their names, which must stay the same across restarts", c.clusterName)
	}
	if len(c.routes) == 0 {
		return invalid("ClusterName %q without Routes: a JetStream cluster node needs the route URLs of the nodes (its own may be among them)", c.clusterName)
	}
	if err := checkPort("RoutePort", c.routePort); err != nil {
		return err
	}
	o.Cluster = server.ClusterOpts{Name: c.clusterName, Host: c.host, Port: c.routePort}
	if o.Cluster.Port == 0 {
		o.Cluster.Port = server.RANDOM_PORT
	}
	for _, r := range c.routes {
		u, err := parseRoute(r)
		if err != nil {
			return err
		}
		o.Routes = append(o.Routes, u)
	}
	return nil
}

// parseRoute reads a route URL; host:port alone means nats://host:port.
func parseRoute(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" || u.Port() == "" {
		return nil, invalid("Routes: %q: want nats://host:port", s)
	}
	return u, nil
}

// storeDir returns the store directory the options ask for: Dir's, kept (own false),
// or a new temporary one named pattern, in tmpfs with TmpfsStore, that Close removes
// (own true).
func (c *config) storeDir(pattern string) (dir string, own bool, err error) {
	if c.dir != "" {
		return c.dir, false, nil
	}
	base := ""
	if c.tmpfs {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			base = "/dev/shm"
		}
	}
	d, err := os.MkdirTemp(base, pattern)
	if err != nil {
		return "", false, fmt.Errorf("embedded: create a temporary store directory: %w", err)
	}
	return d, true, nil
}
