package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/ui"
)

// uiFlags is `workq ui`.
type uiFlags struct {
	addr      string
	prefix    string
	readOnly  bool
	token     string
	basicAuth string
	refresh   time.Duration
}

func (a *app) uiCommand() *cobra.Command {
	f := &uiFlags{}
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web dashboard: queues, jobs, dead letters, schedules, locks",
		Long: `Serve the web dashboard on --addr (default loopback): every queue's numbers,
updated in place, and charts of its last hour (flow, depths, oldest job; sampled
by the dashboard every 5s while it runs); its jobs by state and kind, each with
its record, attempts, headers and payload; dead letters to requeue or purge;
periodic schedules; held locks and rate limiters. Actions (pause and resume a
queue, cancel a job, requeue and purge dead letters, pause, resume and remove
schedules) are hidden with --read-only.

Put it behind a secret with --ui-token (a browser enters it once on the login
page; scripts send "Authorization: Bearer <token>") or --basic-auth user:password.
Served on anything but loopback without either, it warns: whoever reaches the
address can act on every queue.`,
		Example: `  workq ui
  workq ui --addr :8090 --read-only
  WORKQ_UI_TOKEN=$(openssl rand -hex 16) workq ui --addr 0.0.0.0:8090`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.execute(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8090", "address to serve on (host:port; :port is loopback)")
	fl.StringVar(&f.prefix, "prefix", "", "path prefix to serve under, such as /workq (behind a reverse proxy)")
	fl.BoolVar(&f.readOnly, "read-only", false, "show, but offer and accept no action")
	fl.StringVar(&f.token, "ui-token", os.Getenv("WORKQ_UI_TOKEN"), "token the dashboard asks for ($WORKQ_UI_TOKEN)")
	fl.StringVar(&f.basicAuth, "basic-auth", os.Getenv("WORKQ_UI_BASIC_AUTH"), "user:password for HTTP basic auth ($WORKQ_UI_BASIC_AUTH)")
	fl.DurationVar(&f.refresh, "refresh", 2*time.Second, "how often open pages update their numbers (at least 500ms)")
	return cmd
}

func (f *uiFlags) validate() error {
	addr, err := listenAddr("--addr", f.addr)
	if err != nil {
		return err
	}
	f.addr = addr
	if f.basicAuth != "" && !strings.Contains(f.basicAuth, ":") {
		return errors.New("--basic-auth: want user:password")
	}
	if f.refresh < 500*time.Millisecond {
		return fmt.Errorf("--refresh %s: want at least 500ms", f.refresh)
	}
	return nil
}

// loopback reports whether listening on host reaches this machine only.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// run serves the dashboard until the context ends (a signal).
func (f *uiFlags) run(ctx context.Context, a *app) error {
	opts := []ui.Option{ui.Refresh(f.refresh), ui.Logger(slog.New(slog.NewTextHandler(a.stderr, nil)))}
	if f.prefix != "" {
		opts = append(opts, ui.Prefix(f.prefix))
	}
	if f.readOnly {
		opts = append(opts, ui.ReadOnly())
	}
	if f.token != "" {
		opts = append(opts, ui.Token(f.token))
	}
	if f.basicAuth != "" {
		user, pass, _ := strings.Cut(f.basicAuth, ":")
		opts = append(opts, ui.BasicAuth(user, pass))
	}
	c, err := a.connect(ctx, "ui", true)
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := ui.New(c.admin, opts...)
	if err != nil {
		return usageError{err}
	}
	defer h.Close()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("ui: listen on %s: %w", f.addr, err)
	}
	host, _, _ := net.SplitHostPort(f.addr)
	if !loopback(host) && f.token == "" && f.basicAuth == "" {
		fmt.Fprintf(a.stderr, "workq ui: warning: serving on %s without --ui-token or --basic-auth: anyone who reaches it can see every job and act on every queue\n", ln.Addr())
	}
	mode := ""
	if f.readOnly {
		mode = " (read-only)"
	}
	fmt.Fprintf(a.stdout, "workq ui: serving the dashboard of %s on http://%s%s/%s\n", c.url, ln.Addr(), f.prefix, mode)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("ui: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}
