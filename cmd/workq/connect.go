package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// defaultServer is where workq connects without --server or NATS_URL.
const defaultServer = "nats://127.0.0.1:4222"

// opTimeout bounds one-shot commands' server operations beyond --wait, so that a
// server that stops answering gives an error rather than a hang.
const opTimeout = 15 * time.Second

// connFlags are the connection flags shared by every command that talks to a
// server, named as the nats CLI names them.
type connFlags struct {
	server, creds, nkey, user, password, token string
	tlsCert, tlsKey, tlsCA                     string
	wait                                       time.Duration
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (f *connFlags) register(root *cobra.Command) {
	p := root.PersistentFlags()
	p.StringVarP(&f.server, "server", "s", envOr("NATS_URL", defaultServer), "NATS server URL(s), comma separated ($NATS_URL)")
	p.StringVar(&f.creds, "creds", os.Getenv("NATS_CREDS"), "user credentials file ($NATS_CREDS)")
	p.StringVar(&f.nkey, "nkey", os.Getenv("NATS_NKEY"), "user NKey seed file ($NATS_NKEY)")
	p.StringVar(&f.user, "user", os.Getenv("NATS_USER"), "user name ($NATS_USER)")
	p.StringVar(&f.password, "password", os.Getenv("NATS_PASSWORD"), "password ($NATS_PASSWORD)")
	p.StringVar(&f.token, "token", os.Getenv("NATS_TOKEN"), "authentication token ($NATS_TOKEN)")
	p.StringVar(&f.tlsCert, "tls-cert", "", "client TLS certificate file")
	p.StringVar(&f.tlsKey, "tls-key", "", "client TLS private key file")
	p.StringVar(&f.tlsCA, "tls-ca", "", "CA certificate file to verify the server")
	p.DurationVar(&f.wait, "wait", 0, "wait up to this long for the server to be reachable (default: fail at once)")
	for _, name := range []string{"creds", "nkey", "tls-cert", "tls-key", "tls-ca"} {
		_ = root.MarkPersistentFlagFilename(name)
	}
}

// conn is a connection to the server with its JetStream context.
type conn struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	url string
}

func (c *conn) Close() {
	if c.nc != nil {
		_ = c.nc.Drain()
		c.nc.Close()
	}
}

// connect connects to the server and checks that JetStream answers. Without --wait
// an unreachable server is an error at once; with it, workq retries until then.
// longLived connections (workers, lock holders) reconnect forever after that.
func (a *app) connect(ctx context.Context, name string, longLived bool) (*conn, error) {
	f := &a.conn
	opts := []nats.Option{nats.Name("workq " + name), nats.Timeout(3 * time.Second)}
	if longLived {
		opts = append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
		if log := a.connLog; log != nil {
			opts = append(opts,
				nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
					if nc.IsClosed() {
						return // workq closed it: not a loss
					}
					args := []any{"server", f.server}
					if err != nil {
						args = append(args, "err", err)
					}
					log.Warn("lost the connection to NATS; reconnecting", args...)
				}),
				nats.ReconnectHandler(func(nc *nats.Conn) {
					log.Info("reconnected to NATS", "server", nc.ConnectedUrlRedacted())
				}))
		}
	}
	// Keep the client library quiet: errors reach the user through workq's messages.
	opts = append(opts, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if f.creds != "" {
		if _, err := os.Stat(f.creds); err != nil {
			return nil, fmt.Errorf("credentials file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(f.creds))
	}
	if f.nkey != "" {
		o, err := nats.NkeyOptionFromSeed(f.nkey)
		if err != nil {
			return nil, fmt.Errorf("nkey seed file %s: %w", f.nkey, err)
		}
		opts = append(opts, o)
	}
	if f.user != "" || f.password != "" {
		opts = append(opts, nats.UserInfo(f.user, f.password))
	}
	if f.token != "" {
		opts = append(opts, nats.Token(f.token))
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return nil, usageError{errors.New("--tls-cert and --tls-key go together")}
	}
	if f.tlsCert != "" {
		opts = append(opts, nats.ClientCert(f.tlsCert, f.tlsKey))
	}
	if f.tlsCA != "" {
		opts = append(opts, nats.RootCAs(f.tlsCA))
	}

	deadline := time.Now().Add(f.wait)
	var nc *nats.Conn
	waitLogged := false
	for {
		var err error
		nc, err = nats.Connect(f.server, opts...)
		if err == nil {
			break
		}
		if !retryableConnect(err) || !time.Now().Before(deadline) {
			return nil, connectError(f.server, err, f.wait)
		}
		if !waitLogged && a.connLog != nil {
			waitLogged = true
			a.connLog.Info("NATS server not reachable yet; waiting for it", "server", f.server,
				"wait", f.wait, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, interrupted(f.server+" to be reachable", f.wait)
		case <-time.After(250 * time.Millisecond):
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	// JetStream may still be starting (or absent): check it answers.
	for {
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = js.AccountInfo(actx)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() == nil && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
				continue
			}
		}
		nc.Close()
		switch {
		case ctx.Err() != nil:
			return nil, interrupted("JetStream on "+f.server+" to answer", f.wait)
		case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
			return nil, fmt.Errorf("JetStream is not enabled on %s for this account (start nats-server with -js, or run 'workq server')", f.server)
		default:
			return nil, fmt.Errorf("JetStream on %s does not answer: %v", f.server, err)
		}
	}
	return &conn{nc: nc, js: js, url: nc.ConnectedUrlRedacted()}, nil
}

// retryableConnect says whether waiting may help: the server is not up yet.
// Authentication and TLS problems will not go away.
func retryableConnect(err error) bool {
	return !errors.Is(err, nats.ErrAuthorization) && !errors.Is(err, nats.ErrAuthExpired) &&
		!strings.Contains(strings.ToLower(err.Error()), "authorization") && !isTLSError(err)
}

func isTLSError(err error) bool {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) ||
		strings.Contains(err.Error(), "tls:")
}

// connectError says why a connection failed and what to do about it, in one line.
func connectError(server string, err error, wait time.Duration) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization"):
		return fmt.Errorf("server %s refused the credentials (authorization violation); check --user/--password, --token, --creds or --nkey", server)
	case errors.Is(err, nats.ErrAuthExpired):
		return fmt.Errorf("server %s: credentials expired", server)
	case isTLSError(err):
		return fmt.Errorf("TLS with server %s failed: %v; check --tls-ca, --tls-cert and --tls-key", server, err)
	case errors.Is(err, nats.ErrNoServers):
		if wait > 0 {
			return fmt.Errorf("cannot connect to %s: no server answered within --wait %s", server, wait)
		}
		return fmt.Errorf("cannot connect to %s: no server is reachable there (is it running? set --server or NATS_URL, or --wait for it)", server)
	}
	return fmt.Errorf("cannot connect to %s: %v", server, err)
}

// interrupted is the error of a connection given up because workq was signalled
// (SIGINT, SIGTERM) while it waited for what.
func interrupted(what string, wait time.Duration) error {
	if wait > 0 {
		return fmt.Errorf("interrupted while waiting for %s (--wait %s)", what, wait)
	}
	return fmt.Errorf("interrupted while waiting for %s", what)
}

// opCtx bounds a one-shot command's work on the server.
func (a *app) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, opTimeout+a.conn.wait)
}

// withConn connects, runs fn with a bounded context and closes the connection.
func (a *app) withConn(ctx context.Context, what string, fn func(ctx context.Context, c *conn) error) error {
	c, err := a.connect(ctx, what, false)
	if err != nil {
		return err
	}
	defer c.Close()
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	return fn(octx, c)
}
