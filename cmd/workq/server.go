package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/workq/workq/embedded"
)

func (a *app) serverCommand() *cobra.Command {
	var (
		data       string
		host       string
		port       int
		syncAlways bool
		logging    bool
		metrics    string
	)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run an embedded nats-server with JetStream (development, small deployments)",
		Long: `Run a nats-server with JetStream in this process and print its URL.

Data lives in --data (default ./workq-data) and survives restarts. By default the
server fsyncs every 2 minutes, so a power failure can lose acknowledged writes;
--sync-always fsyncs every write (slower, durable). Ctrl-C stops it cleanly.
For production, run nats-server itself (ideally a 3-node cluster).`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port < 1 || port > 65535 {
				return usageError{fmt.Errorf("--port %d: want 1 to 65535", port)}
			}
			metricsAddr, err := metricsListenAddr(metrics)
			if err != nil {
				return err
			}
			abs, err := filepath.Abs(data)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(abs, 0o755); err != nil {
				return fmt.Errorf("data directory: %w", err)
			}
			// nats-server reports a taken port only in its log; check first.
			addr := net.JoinHostPort(host, strconv.Itoa(port))
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("cannot listen on %s: %v (is another server running? use --port)", addr, err)
			}
			ln.Close()
			opts := []embedded.Option{embedded.Dir(abs), embedded.Port(port), embedded.Host(host)}
			if syncAlways {
				opts = append(opts, embedded.SyncAlways())
			}
			if logging {
				opts = append(opts, embedded.LogWriter(os.Stderr))
			}
			srv, err := embedded.Run(opts...)
			if err != nil {
				return fmt.Errorf("start server: %v", err)
			}
			sync := "every 2m (use --sync-always for durability against power loss)"
			if syncAlways {
				sync = "always"
			}
			fmt.Fprintf(a.stdout, "workq server listening on %s\n", srv.URL())
			fmt.Fprintf(a.stdout, "  data: %s (fsync %s)\n", abs, sync)
			fmt.Fprintf(a.stdout, "  try:  export NATS_URL=%s; workq enqueue hello world\n", srv.URL())
			stopMetrics := func() {}
			if metricsAddr != "" {
				at, stop, err := serveServerMetrics(metricsAddr, srv.URL())
				if err != nil {
					srv.Close()
					return err
				}
				stopMetrics = stop
				fmt.Fprintf(a.stdout, "  metrics: http://%s/metrics (every queue), health: http://%s/healthz\n", at, at)
			}
			fmt.Fprintln(a.stdout, "  Ctrl-C stops it")
			<-cmd.Context().Done()
			stopMetrics()
			srv.Close() // keeps the data: the directory was given, not created by Run
			fmt.Fprintln(a.stdout, "workq server stopped")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&data, "data", "workq-data", "JetStream data directory")
	fl.StringVar(&host, "host", "127.0.0.1", "listen address (0.0.0.0 for every interface)")
	fl.IntVarP(&port, "port", "p", 4222, "client port")
	fl.BoolVar(&syncAlways, "sync-always", false, "fsync every write")
	fl.BoolVar(&logging, "log", false, "print the server's log")
	addMetricsFlag(fl, &metrics)
	_ = cmd.MarkFlagDirname("data")
	return cmd
}
