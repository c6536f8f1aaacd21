package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/workq/workq/embedded"
)

// serverFlags are the flags of `workq server`. Its --user, --password, --token,
// --tls-cert and --tls-key are the server's own (what clients must present, the
// certificate it serves), shadowing the global client flags of the same names.
type serverFlags struct {
	data       string
	host       string
	port       int
	syncAlways bool
	logging    bool
	metrics    string

	user, password, token string
	tlsCert, tlsKey       string
	config                string
}

func (a *app) serverCommand() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run an embedded nats-server with JetStream (development, small deployments)",
		Long: `Run a nats-server with JetStream in this process and print its URL.

Data lives in --data (default ./workq-data) and survives restarts. By default the
server fsyncs every 2 minutes, so a power failure can lose acknowledged writes;
--sync-always fsyncs every write (slower, durable). --user and --password, or
--token, make clients authenticate; --tls-cert and --tls-key make them connect with
TLS (then the URL is tls://). --config reads a nats-server configuration file for
users with permissions (see 'workq perms'), accounts, JWT operators and TLS with
client certificates (verify: true); the listen address and the data directory stay
with the flags. Ctrl-C stops it cleanly.
For production, run nats-server itself (ideally a 3-node cluster).`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			return a.server(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", "workq-data", "JetStream data directory")
	fl.StringVar(&f.host, "host", "127.0.0.1", "listen address (0.0.0.0 for every interface)")
	fl.IntVarP(&f.port, "port", "p", 4222, "client port")
	fl.BoolVar(&f.syncAlways, "sync-always", false, "fsync every write")
	fl.BoolVar(&f.logging, "log", false, "print the server's log")
	fl.StringVar(&f.user, "user", "", "user clients must authenticate as (with --password)")
	fl.StringVar(&f.password, "password", "", "password clients must present (with --user)")
	fl.StringVar(&f.token, "token", "", "token clients must present (instead of --user and --password)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (PEM): clients must connect with TLS")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS private key file (PEM) of --tls-cert")
	fl.StringVar(&f.config, "config", "", "nats-server configuration file: users, permissions, accounts, TLS")
	addMetricsFlag(fl, &f.metrics)
	_ = cmd.MarkFlagDirname("data")
	_ = cmd.MarkFlagFilename("config")
	return cmd
}

func (f *serverFlags) validate() error {
	switch {
	case f.port < 1 || f.port > 65535:
		return usageError{fmt.Errorf("--port %d: want 1 to 65535", f.port)}
	case (f.user == "") != (f.password == ""):
		return usageError{errors.New("--user and --password: give both, or neither")}
	case f.token != "" && f.user != "":
		return usageError{errors.New("--token and --user: give one or the other")}
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return usageError{errors.New("--tls-cert and --tls-key: give both, or neither")}
	}
	if f.config != "" {
		if _, err := os.Stat(f.config); err != nil {
			return usageError{fmt.Errorf("--config: %w", err)}
		}
		if f.metrics != "" {
			// The metrics come from a client inside the process, which would need a
			// user of the file's own.
			return usageError{errors.New("--metrics-addr and --config: not together; scrape the workers' --metrics-addr instead")}
		}
	}
	_, err := metricsListenAddr(f.metrics)
	return err
}

// options are the embedded server's options for these flags, storing in dir.
func (f *serverFlags) options(dir string) []embedded.Option {
	opts := []embedded.Option{embedded.Dir(dir), embedded.Port(f.port), embedded.Host(f.host)}
	if f.syncAlways {
		opts = append(opts, embedded.SyncAlways())
	}
	if f.logging {
		opts = append(opts, embedded.LogWriter(os.Stderr))
	}
	if f.user != "" {
		opts = append(opts, embedded.UserPassword(f.user, f.password))
	}
	if f.token != "" {
		opts = append(opts, embedded.Token(f.token))
	}
	if f.tlsCert != "" {
		opts = append(opts, embedded.TLSFiles(f.tlsCert, f.tlsKey))
	}
	if f.config != "" {
		opts = append(opts, embedded.ConfigFile(f.config))
	}
	return opts
}

// server runs the server until ctx ends.
func (a *app) server(ctx context.Context, f serverFlags) error {
	metricsAddr, _ := metricsListenAddr(f.metrics) // checked by validate
	abs, err := filepath.Abs(f.data)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	srv, err := embedded.Run(f.options(abs)...)
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "listen" {
		addr := net.JoinHostPort(f.host, strconv.Itoa(f.port))
		return fmt.Errorf("cannot listen on %s: %v (is another server running? use --port)", addr, op.Err)
	}
	if err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	sync := "every 2m (use --sync-always for durability against power loss)"
	if f.syncAlways {
		sync = "always"
	}
	fmt.Fprintf(a.stdout, "workq server listening on %s\n", srv.URL())
	fmt.Fprintf(a.stdout, "  data: %s (fsync %s)\n", abs, sync)
	switch {
	case f.user != "":
		fmt.Fprintf(a.stdout, "  auth: user %s (clients: --user and --password)\n", f.user)
	case f.token != "":
		fmt.Fprintln(a.stdout, "  auth: token (clients: --token)")
	case f.config != "":
		fmt.Fprintf(a.stdout, "  config: %s\n", f.config)
	}
	if f.tlsCert != "" {
		fmt.Fprintf(a.stdout, "  tls:  certificate %s (clients: --tls-ca with what signed it)\n", f.tlsCert)
	}
	fmt.Fprintf(a.stdout, "  try:  export NATS_URL=%s; workq enqueue hello world\n", srv.URL())
	stopMetrics := func() {}
	if metricsAddr != "" {
		// In process: no TCP and no TLS to trust (so a nats:// URL, which does not
		// insist on TLS); the credentials still apply.
		url := "nats://" + net.JoinHostPort(f.host, strconv.Itoa(f.port))
		at, stop, err := serveServerMetrics(metricsAddr, url, append(srv.ClientOptions(), nats.InProcessServer(srv.NATS()))...)
		if err != nil {
			srv.Close()
			return err
		}
		stopMetrics = stop
		fmt.Fprintf(a.stdout, "  metrics: http://%s/metrics (every queue), health: http://%s/healthz\n", at, at)
	}
	fmt.Fprintln(a.stdout, "  Ctrl-C stops it")
	<-ctx.Done()
	stopMetrics()
	srv.Close() // keeps the data: the directory was given, not created by Run
	fmt.Fprintln(a.stdout, "workq server stopped")
	return nil
}
