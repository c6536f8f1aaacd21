package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"
	"github.com/workq/workq/admin"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/perms"
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
	inbox                                      string
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
	// The TLS files default to the environment variables the nats CLI reads, so that
	// one environment serves both tools.
	p.StringVar(&f.tlsCert, "tls-cert", os.Getenv("NATS_CERT"), "client TLS certificate file ($NATS_CERT)")
	p.StringVar(&f.tlsKey, "tls-key", os.Getenv("NATS_KEY"), "client TLS private key file ($NATS_KEY)")
	p.StringVar(&f.tlsCA, "tls-ca", os.Getenv("NATS_CA"), "CA certificate file to verify the server ($NATS_CA)")
	p.StringVar(&f.inbox, "inbox-prefix", os.Getenv("NATS_INBOX_PREFIX"), "prefix of the subjects replies come to, for a user allowed only its own (see 'workq perms'; default _INBOX) ($NATS_INBOX_PREFIX)")
	p.DurationVar(&f.wait, "wait", 0, "wait up to this long for the server to be reachable (default: fail at once)")
	for _, name := range []string{"creds", "nkey", "tls-cert", "tls-key", "tls-ca"} {
		_ = root.MarkPersistentFlagFilename(name)
	}
}

// conn is a connection to the server with its JetStream context.
type conn struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	admin *admin.Admin
	url   string
}

func (c *conn) Close() {
	if c.nc != nil {
		_ = c.nc.Drain()
		c.nc.Close()
	}
}

// lostTo explains err, what a long-lived command got when its connection ended,
// if the server ended it for good by refusing the credentials (or they expired):
// the client library gives up reconnecting after the server refuses it twice, and
// the command sees only "connection closed", which does not say why nor what to
// check. Any other err is returned as it is.
func (c *conn) lostTo(f *connFlags, err error) error {
	if err == nil || !c.nc.IsClosed() {
		return err
	}
	last := c.nc.LastError()
	if last == nil || retryableConnect(last) {
		return err
	}
	return fmt.Errorf("lost the connection: %w", connectError(f, last))
}

// validate checks the flags that go together. connect calls it: the connection
// flags matter only to the commands that connect.
func (f *connFlags) validate() error {
	if err := checkServerURLs(f.server); err != nil {
		return err
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if f.inbox != "" {
		if err := perms.CheckInbox(f.inbox); err != nil {
			return fmt.Errorf("--inbox-prefix: %w", err)
		}
	}
	return nil
}

// checkServerURLs refuses a --server URL whose scheme is not one NATS speaks: an
// http:// URL (a monitoring port, a copy from a browser) would otherwise end in a dial
// timeout that does not say why.
func checkServerURLs(servers string) error {
	for _, s := range strings.Split(servers, ",") {
		s = strings.TrimSpace(s)
		scheme, rest, ok := strings.Cut(s, "://")
		if !ok {
			continue // host:port; nats.go assumes nats://
		}
		switch strings.ToLower(scheme) {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("--server %s: not a NATS URL (%s://); use nats://%s (or tls://, ws://, wss://)", s, scheme, rest)
		}
	}
	return nil
}

// connect connects to the server and checks that JetStream answers. Without --wait
// an unreachable server is an error at once; with it, workq retries until then.
// longLived connections (workers, lock holders) reconnect forever after that.
func (a *app) connect(ctx context.Context, name string, longLived bool) (*conn, error) {
	f := &a.conn
	if err := f.validate(); err != nil {
		return nil, usageError{err}
	}
	opts, err := f.options(name)
	if err != nil {
		return nil, err
	}
	if longLived {
		opts = append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
		opts = append(opts, a.reconnectLog()...)
	}
	deadline := time.Now().Add(f.wait)
	nc, err := a.dial(ctx, opts, deadline)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if err := f.waitJetStream(ctx, js, deadline); err != nil {
		nc.Close()
		return nil, err
	}
	adm, err := admin.New(js)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &conn{nc: nc, js: js, admin: adm, url: nc.ConnectedUrlRedacted()}, nil
}

// options are the client's options from the flags: its name, the credentials and
// TLS, and no error output of the client library's own (errors reach the user
// through workq's messages).
func (f *connFlags) options(name string) ([]nats.Option, error) {
	opts := []nats.Option{nats.Name("workq " + name), nats.Timeout(3 * time.Second),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}
	if err := f.checkFiles(); err != nil {
		return nil, err
	}
	if f.creds != "" {
		opts = append(opts, nats.UserCredentials(f.creds))
	}
	if f.nkey != "" {
		o, err := nats.NkeyOptionFromSeed(f.nkey)
		if err != nil {
			return nil, loginFileError("nkey", f.nkey, err)
		}
		opts = append(opts, o)
	}
	if f.user != "" || f.password != "" {
		opts = append(opts, nats.UserInfo(f.user, f.password))
	}
	if f.token != "" {
		opts = append(opts, nats.Token(f.token))
	}
	if f.tlsCert != "" {
		opts = append(opts, nats.ClientCert(f.tlsCert, f.tlsKey))
	}
	if f.tlsCA != "" {
		opts = append(opts, nats.RootCAs(f.tlsCA))
	}
	if f.inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(f.inbox))
	}
	return opts, nil
}

// checkFiles reads the credentials and TLS files of the flags before workq
// connects. The client library reads them only while it connects, so a file that is
// missing or not what its flag wants would surface as a connection error, vaguely
// worded and retried for all of --wait; waiting does not mend a file, so workq fails
// at once, naming the flag. (options parses --nkey's seed file itself.)
func (f *connFlags) checkFiles() error {
	if f.creds != "" {
		b, err := readLoginFile("creds", f.creds)
		if err != nil {
			return err
		}
		if _, err := userClaims(b); err != nil {
			return loginFileError("creds", f.creds, err)
		}
	}
	if f.tlsCert != "" {
		cert, err := readLoginFile("tls-cert", f.tlsCert)
		if err != nil {
			return err
		}
		key, err := readLoginFile("tls-key", f.tlsKey)
		if err != nil {
			return err
		}
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			return loginFileError("tls-cert", f.tlsCert, fmt.Errorf("with --tls-key %s: %v", f.tlsKey, err))
		}
	}
	if f.tlsCA != "" {
		b, err := readLoginFile("tls-ca", f.tlsCA)
		if err != nil {
			return err
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return loginFileError("tls-ca", f.tlsCA, errors.New("no PEM certificate in it"))
		}
	}
	return nil
}

// readLoginFile reads the file of a connection flag.
func readLoginFile(flag, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, loginFileError(flag, path, err)
	}
	return b, nil
}

// userClaims decodes the user JWT of a credentials file, checking that the file
// also holds the user's seed, as the client library needs both.
func userClaims(creds []byte) (*jwt.UserClaims, error) {
	token, err := nkeys.ParseDecoratedJWT(creds)
	if err != nil {
		return nil, err
	}
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return nil, fmt.Errorf("no user JWT in it (%v)", err)
	}
	if _, err := nkeys.ParseDecoratedUserNKey(creds); err != nil {
		return nil, fmt.Errorf("no user seed in it (%v)", err)
	}
	return claims, nil
}

// reconnectLog tells connLog, if set, when a long-lived connection is lost and
// regained.
func (a *app) reconnectLog() []nats.Option {
	log := a.connLog
	if log == nil {
		return nil
	}
	return []nats.Option{
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return // workq closed it: not a loss
			}
			args := []any{"server", a.conn.server}
			if err != nil {
				args = append(args, "err", err)
			}
			log.Warn("lost the connection to NATS; reconnecting", args...)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("reconnected to NATS", "server", nc.ConnectedUrlRedacted())
		}),
	}
}

// dial connects to the server, retrying until deadline while it is not reachable.
func (a *app) dial(ctx context.Context, opts []nats.Option, deadline time.Time) (*nats.Conn, error) {
	f := &a.conn
	waitLogged := false
	for {
		nc, err := nats.Connect(f.server, opts...)
		if err == nil {
			return nc, nil
		}
		if !retryableConnect(err) || !time.Now().Before(deadline) {
			return nil, connectError(f, err)
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
}

// waitJetStream checks that JetStream answers, retrying until deadline: it may
// still be starting (or absent).
func (f *connFlags) waitJetStream(ctx context.Context, js jetstream.JetStream, deadline time.Time) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := js.AccountInfo(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() == nil && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
				continue
			}
		}
		switch {
		case ctx.Err() != nil:
			return interrupted("JetStream on "+f.server+" to answer", f.wait)
		case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
			return fmt.Errorf("JetStream is not enabled on %s for this account (start nats-server with -js, or run 'workq server')", f.server)
		case errors.Is(js.Conn().LastError(), nats.ErrPermissionViolation):
			// The connection is new: the violation is this check's (or its reply
			// subscription's). A user allowed only its own inbox gets no reply on _INBOX.
			return fmt.Errorf("JetStream on %s does not answer this user: %v (see 'workq perms'; a user whose replies come to an inbox of its own needs --inbox-prefix)",
				f.server, js.Conn().LastError())
		default:
			return fmt.Errorf("JetStream on %s does not answer: %v", f.server, err)
		}
	}
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
	// A request the user's permissions deny gets no answer, only a violation on the
	// connection: end the command at once, with the violation as the error.
	before := c.nc.LastError()
	octx, stop := retry.UntilDenied(retry.WithConn(octx, c.nc), c.nc)
	defer stop()
	err = fn(octx, c)
	if denied := retry.Denied(c.nc, before); err != nil && denied != nil && !errors.Is(err, nats.ErrPermissionViolation) {
		return fmt.Errorf("%s: %w", what, denied)
	}
	return err
}
