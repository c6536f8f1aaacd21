package main_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/testcert"
	"github.com/workq/workq/producer"
)

// A login is one way to log in to a nats-server: the server's configuration, and
// what a client presents, as workq flags and as nats.go options. bad are the logins
// that server must refuse.
type login struct {
	name   string
	conf   string        // nats-server configuration besides listen and JetStream
	scheme string        // of the server's URL: nats or tls
	flags  []string      // workq's flags; each is tested as its environment variable too
	opts   []nats.Option // the library's options for the same login
	bad    []badLogin
}

// A badLogin is a login the server refuses, or a client cannot even try. The CLI
// must say so in one line that mentions every string of want, exit 1, and not wait
// for it (also with --wait); the library's connect error must satisfy libErr.
type badLogin struct {
	name   string
	scheme string // of the URL the client uses, if not the server's
	flags  []string
	opts   []nats.Option
	want   []string
	libErr func(error) bool
}

// envVars are the environment variables of workq's connection flags.
var envVars = map[string]string{
	"--user": "NATS_USER", "--password": "NATS_PASSWORD", "--token": "NATS_TOKEN",
	"--nkey": "NATS_NKEY", "--creds": "NATS_CREDS",
	"--tls-cert": "NATS_CERT", "--tls-key": "NATS_KEY", "--tls-ca": "NATS_CA",
}

// TestLogin logs in every way the CLI and the library support, against a nats-server
// process configured for it, with workq's flags, with its environment variables and
// with nats.go's options; and checks that each bad login fails at once, in one line.
func TestLogin(t *testing.T) {
	t.Parallel()
	for _, l := range logins(t) {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			url := startConfigured(t, l.conf, l.scheme)
			t.Run("cli", func(t *testing.T) { cliLogin(t, url, l.flags) })
			t.Run("library", func(t *testing.T) { libraryLogin(t, url, l.opts) })
			for _, b := range l.bad {
				burl := url
				if b.scheme != "" {
					burl = b.scheme + strings.TrimPrefix(url, l.scheme)
				}
				t.Run("bad/"+b.name, func(t *testing.T) { badCLILogin(t, burl, b) })
				if b.libErr != nil {
					t.Run("bad/"+b.name+"/library", func(t *testing.T) { badLibraryLogin(t, burl, b) })
				}
			}
			// Nothing a bad login tried reached the server.
			if out := okAt(t, url, l.flags, "queue", "ls"); strings.Contains(out, "refused") {
				t.Errorf("a refused login made a queue: %s", out)
			}
		})
	}
}

// TestLoginExpiresWhileWorking runs `workq work` with credentials that expire while
// it runs: the server then closes its connection and refuses it back, and workq must
// exit 1 saying why, rather than reconnect forever or say "connection closed".
func TestLoginExpiresWhileWorking(t *testing.T) {
	t.Parallel()
	op := newOperator(t)
	acct := op.account(t, "A", true)
	url := startConfigured(t, op.conf(acct), "nats")
	creds := filepath.Join(t.TempDir(), "expiring.creds")
	expires := time.Now().Add(5 * time.Second)
	if err := os.WriteFile(creds, acct.user(t, expires), 0o600); err != nil {
		t.Fatal(err)
	}
	w := newProc([]string{"-s", url, "--creds", creds, "work", "expiring", "--", "cat"})
	w.launch(t)
	waitFor(t, time.Until(expires), "the worker to start before its credentials expire", func() bool {
		return strings.Contains(w.stderr(), "worker started")
	})
	if code := w.wait(t, 20*time.Second); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(w.stderr()), "\n")
	last := lines[len(lines)-1]
	t.Logf("last line: %s", last)
	for _, want := range []string{"workq: lost the connection", "expired at", creds} {
		if !strings.Contains(last, want) {
			t.Errorf("the last line of stderr %q does not say %q", last, want)
		}
	}
}

// logins are the logins of TestLogin, with the keys, JWTs and certificates they use
// made for the test.
func logins(t *testing.T) []login {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing")
	isDir := t.TempDir() // a path that exists but is no file

	// NKeys: a user the server knows and one it does not.
	known, knownSeed := newKey(t, nkeys.CreateUser)
	_, strangerSeed := newKey(t, nkeys.CreateUser)
	seedFile, strangerFile := write("user.nk", knownSeed), write("stranger.nk", strangerSeed)
	garbage := write("garbage", []byte("not a seed nor credentials\n"))

	// Decentralized auth: an operator trusting account A (with JetStream) and the
	// system account; users of A, one expired; a user of account B, which the
	// operator never signed.
	op := newOperator(t)
	acct := op.account(t, "A", true)
	creds := write("user.creds", acct.user(t, time.Time{}))
	expired := write("expired.creds", acct.user(t, time.Now().Add(-time.Hour)))
	untrusted := write("untrusted.creds", newOperator(t).account(t, "B", true).user(t, time.Time{}))

	// TLS: the server's CA, a client of it, and a CA and client the server does not know.
	ca, other := testcert.NewCA(t, "workq test CA"), testcert.NewCA(t, "another CA")
	srvCert, srvKey := ca.Server(t)
	cliCert, cliKey := ca.Client(t, "workq client")
	strangerCert, strangerKey := other.Client(t, "stranger")
	tlsConf := fmt.Sprintf("tls { cert_file: %q, key_file: %q }", srvCert, srvKey)
	mtlsConf := fmt.Sprintf("tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }", srvCert, srvKey, ca.File)

	authErr := errIs(nats.ErrAuthorization)
	return []login{
		{
			name: "user-password", scheme: "nats",
			conf:  `authorization { users = [{user: "ann", password: "s3cret"}] }`,
			flags: []string{"--user", "ann", "--password", "s3cret"},
			opts:  []nats.Option{nats.UserInfo("ann", "s3cret")},
			bad: []badLogin{
				{name: "wrong password", flags: []string{"--user", "ann", "--password", "wrong"},
					opts: []nats.Option{nats.UserInfo("ann", "wrong")}, libErr: authErr,
					want: []string{"refused the credentials", "--user and --password"}},
				{name: "no credentials", libErr: authErr, want: []string{"refused the credentials", "gave none"}},
				{name: "tls URL to a server without TLS", scheme: "tls", flags: []string{"--user", "ann", "--password", "s3cret"},
					opts: []nats.Option{nats.UserInfo("ann", "s3cret")}, libErr: errIs(nats.ErrSecureConnWanted),
					want: []string{"does not offer TLS", "nats:// URL"}},
			},
		},
		{
			name: "token", scheme: "nats",
			conf:  `authorization { token: "t0ken" }`,
			flags: []string{"--token", "t0ken"},
			opts:  []nats.Option{nats.Token("t0ken")},
			bad: []badLogin{
				{name: "wrong token", flags: []string{"--token", "wrong"}, opts: []nats.Option{nats.Token("wrong")}, libErr: authErr,
					want: []string{"refused the credentials", "--token"}},
			},
		},
		{
			name: "nkey", scheme: "nats",
			conf:  fmt.Sprintf(`authorization { users = [{nkey: %q}] }`, known),
			flags: []string{"--nkey", seedFile},
			opts:  []nats.Option{nkeyOption(t, seedFile)},
			bad: []badLogin{
				{name: "unknown nkey", flags: []string{"--nkey", strangerFile}, opts: []nats.Option{nkeyOption(t, strangerFile)}, libErr: authErr,
					want: []string{"refused the credentials", "nkey seed file " + strangerFile}},
				{name: "missing seed file", flags: []string{"--nkey", missing}, want: []string{"cannot use " + missing, "--nkey", "no such file"}},
				{name: "unreadable seed file", flags: []string{"--nkey", isDir}, want: []string{"cannot use " + isDir, "--nkey", "is a directory"}},
				{name: "not a seed", flags: []string{"--nkey", garbage}, want: []string{"cannot use " + garbage, "--nkey", "no nkey seed"}},
			},
		},
		{
			name: "creds", scheme: "nats",
			conf:  op.conf(acct),
			flags: []string{"--creds", creds},
			opts:  []nats.Option{nats.UserCredentials(creds)},
			bad: []badLogin{
				// The server refuses an expired JWT as any other: nats.go's error is
				// ErrAuthorization, not ErrAuthExpired (which is for a connection whose
				// JWT expires while it is up); workq looks at the JWT to say "expired".
				{name: "expired", flags: []string{"--creds", expired}, opts: []nats.Option{nats.UserCredentials(expired)}, libErr: authErr,
					want: []string{"refused the credentials", "expired at", expired}},
				{name: "untrusted account", flags: []string{"--creds", untrusted}, opts: []nats.Option{nats.UserCredentials(untrusted)}, libErr: authErr,
					want: []string{"refused the credentials", "credentials file " + untrusted}},
				{name: "missing file", flags: []string{"--creds", missing}, opts: []nats.Option{nats.UserCredentials(missing)}, libErr: errIs(fs.ErrNotExist),
					want: []string{"cannot use " + missing, "--creds", "no such file"}},
				{name: "unreadable file", flags: []string{"--creds", isDir}, opts: []nats.Option{nats.UserCredentials(isDir)}, libErr: errIs(syscall.EISDIR),
					want: []string{"cannot use " + isDir, "--creds", "is a directory"}},
				// nats.go sends a file without decorations as the JWT and fails to sign
				// the server's nonce with a seed it does not hold.
				{name: "not credentials", flags: []string{"--creds", garbage}, opts: []nats.Option{nats.UserCredentials(garbage)}, libErr: errIs(nkeys.ErrNoSeedFound),
					want: []string{"cannot use " + garbage, "--creds", "no user JWT"}},
			},
		},
		{
			name: "tls", scheme: "tls",
			conf:  tlsConf,
			flags: []string{"--tls-ca", ca.File},
			opts:  []nats.Option{nats.RootCAs(ca.File)},
			bad: []badLogin{
				{name: "no CA", libErr: unknownAuthority, want: []string{"unknown authority", "give its CA with --tls-ca"}},
				{name: "another CA", flags: []string{"--tls-ca", other.File}, opts: []nats.Option{nats.RootCAs(other.File)}, libErr: unknownAuthority,
					want: []string{"unknown authority", "not signed by --tls-ca " + other.File}},
				// nats.go upgrades a nats:// connection to TLS when the server requires it.
				{name: "nats URL and no CA", scheme: "nats", libErr: unknownAuthority, want: []string{"unknown authority", "give its CA with --tls-ca"}},
				{name: "missing CA file", flags: []string{"--tls-ca", missing}, opts: []nats.Option{nats.RootCAs(missing)}, libErr: errIs(fs.ErrNotExist),
					want: []string{"cannot use " + missing, "--tls-ca", "no such file"}},
				{name: "CA file without a certificate", flags: []string{"--tls-ca", garbage}, opts: []nats.Option{nats.RootCAs(garbage)}, libErr: errText("failed to parse root certificate"),
					want: []string{"cannot use " + garbage, "--tls-ca", "no PEM certificate"}},
			},
		},
		{
			name: "mutual-tls", scheme: "tls",
			conf:  mtlsConf,
			flags: []string{"--tls-cert", cliCert, "--tls-key", cliKey, "--tls-ca", ca.File},
			opts:  []nats.Option{nats.ClientCert(cliCert, cliKey), nats.RootCAs(ca.File)},
			bad: []badLogin{
				{name: "no client certificate", flags: []string{"--tls-ca", ca.File}, opts: []nats.Option{nats.RootCAs(ca.File)}, libErr: tlsRefused,
					want: []string{"server wants a client certificate", "--tls-cert and --tls-key"}},
				{name: "client certificate of another CA", flags: []string{"--tls-cert", strangerCert, "--tls-key", strangerKey, "--tls-ca", ca.File},
					opts: []nats.Option{nats.ClientCert(strangerCert, strangerKey), nats.RootCAs(ca.File)}, libErr: tlsRefused,
					want: []string{"refused the client certificate " + strangerCert}},
				{name: "missing client key", flags: []string{"--tls-cert", cliCert, "--tls-key", missing, "--tls-ca", ca.File},
					opts: []nats.Option{nats.ClientCert(cliCert, missing), nats.RootCAs(ca.File)}, libErr: errIs(fs.ErrNotExist),
					want: []string{"cannot use " + missing, "--tls-key", "no such file"}},
			},
		},
	}
}

func errIs(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// errText is for errors nats.go makes with no value to compare.
func errText(s string) func(error) bool {
	return func(err error) bool { return err != nil && strings.Contains(err.Error(), s) }
}

// tlsRefused recognises a server's refusal of the client's certificate: its TLS
// alert, or, depending on timing, its hanging up after the handshake (nats.ErrTLS).
func tlsRefused(err error) bool {
	var op *net.OpError
	return errors.Is(err, nats.ErrTLS) || errors.As(err, &op) && op.Op == "remote error"
}

func unknownAuthority(err error) bool {
	var ua x509.UnknownAuthorityError
	return errors.As(err, &ua)
}

// startConfigured starts a nats-server process with JetStream (stored in a directory
// of the test) and conf, stopped at the test's end, and returns its URL with scheme.
func startConfigured(t *testing.T, conf, scheme string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "nats.conf")
	conf = fmt.Sprintf("jetstream { store_dir: %q }\n%s\n", t.TempDir(), conf)
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, url, err := startNATS("", "-c", file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(srv) })
	return scheme + strings.TrimPrefix(url, "nats")
}

// cliLogin enqueues a job with the login's flags and one with its environment
// variables, has `workq work` (flags) run both, and lists the queue (environment).
func cliLogin(t *testing.T, url string, flags []string) {
	okAt(t, url, flags, "enqueue", "cli", "by flags", "--id", "flags")
	okIn(t, envOf(t, url, flags), "enqueue", "cli", "by environment", "--id", "env")
	w := newProc(append(append([]string{"-s", url}, flags...), "work", "cli", "--", "cat"))
	w.launch(t)
	for _, id := range []string{"flags", "env"} {
		waitFor(t, 20*time.Second, "job "+id+" done", func() bool {
			return strings.Contains(okIn(t, envOf(t, url, flags), "job", "get", "cli", id, "--json"), `"state": "done"`)
		})
	}
	w.stop(t)
	if out := okIn(t, envOf(t, url, flags), "queue", "ls"); !strings.Contains(out, "cli") {
		t.Errorf("queue ls does not list queue cli: %s", out)
	}
}

// okAt runs workq with -s url and flags before args, and wants exit 0.
func okAt(t *testing.T, url string, flags []string, args ...string) string {
	t.Helper()
	return okIn(t, nil, append(append([]string{"-s", url}, flags...), args...)...)
}

// okIn runs workq in env and wants exit 0.
func okIn(t *testing.T, env []string, args ...string) string {
	t.Helper()
	r := wqEnv(t, env, "", args...)
	if r.code != 0 {
		t.Fatalf("workq %s (env %v): exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), env, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// envOf is the environment that says what url and flags say.
func envOf(t *testing.T, url string, flags []string) []string {
	t.Helper()
	env := []string{"NATS_URL=" + url}
	for i := 0; i+1 < len(flags); i += 2 {
		name, ok := envVars[flags[i]]
		if !ok {
			t.Fatalf("flag %s has no environment variable", flags[i])
		}
		env = append(env, name+"="+flags[i+1])
	}
	return env
}

// libraryLogin connects with opts, enqueues a job with package producer and has a
// worker of package consumer run it.
func libraryLogin(t *testing.T, url string, opts []nats.Option) {
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := producer.New(ctx, js, "library")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("hello"), producer.ID("lib-1")); err != nil {
		t.Fatal(err)
	}
	w, err := consumer.New(ctx, js, "library", consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		j.SetResult(append([]byte("ran "), j.Payload()...))
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	for {
		rec, err := p.Status(ctx, "lib-1")
		if err == nil && rec.State == producer.StateDone {
			if string(rec.Result) != "ran hello" {
				t.Errorf("result %q, want %q", rec.Result, "ran hello")
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("job not done: record %+v, err %v", rec, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-ran; err != nil {
		t.Errorf("worker: %v", err)
	}
}

// badCLILogin runs a one-shot command, the same with --wait 10s, and `workq work`,
// each with the bad login's flags, and wants each to fail at once with one line.
func badCLILogin(t *testing.T, url string, b badLogin) {
	for _, args := range [][]string{
		{"enqueue", "refused", "x"},
		{"--wait", "10s", "enqueue", "refused", "x"},
		{"--wait", "10s", "work", "refused", "--", "cat"},
	} {
		r := wqEnv(t, nil, "", append(append([]string{"-s", url}, b.flags...), args...)...)
		t.Logf("workq %s: %s(%s)", strings.Join(args, " "), r.stderr, r.took)
		oneLine(t, r, 1, b.want...)
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 {
			t.Errorf("workq %s: %d lines on stderr: %q", strings.Join(args, " "), n+1, r.stderr)
		}
		if r.took > 3*time.Second {
			t.Errorf("workq %s took %s to fail", strings.Join(args, " "), r.took)
		}
	}
}

// badLibraryLogin connects with the bad login's options: nats.go must refuse at
// once with the expected error.
func badLibraryLogin(t *testing.T, url string, b badLogin) {
	start := time.Now()
	nc, err := nats.Connect(url, b.opts...)
	t.Logf("nats.Connect: %v (%T) (%s)", err, err, time.Since(start))
	if err == nil {
		nc.Close()
		t.Fatal("connected")
	}
	if !b.libErr(err) {
		t.Errorf("unexpected error %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s to fail", d)
	}
}

// newKey makes an NKey pair with create and returns its public key and seed.
func newKey(t *testing.T, create func() (nkeys.KeyPair, error)) (pub string, seed []byte) {
	t.Helper()
	kp, err := create()
	if err != nil {
		t.Fatal(err)
	}
	if pub, err = kp.PublicKey(); err != nil {
		t.Fatal(err)
	}
	if seed, err = kp.Seed(); err != nil {
		t.Fatal(err)
	}
	return pub, seed
}

func nkeyOption(t *testing.T, seedFile string) nats.Option {
	t.Helper()
	o, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// operator is a NATS operator with its system account, for decentralized auth.
type operator struct {
	kp             nkeys.KeyPair
	jwt            string
	sysPub, sysJWT string
}

// account is an account an operator signed, with its key to sign users.
type account struct {
	kp       nkeys.KeyPair
	pub, jwt string
}

func newOperator(t *testing.T) *operator {
	t.Helper()
	kp, err := nkeys.CreateOperator()
	must(t, err)
	pub, err := kp.PublicKey()
	must(t, err)
	o := &operator{kp: kp}
	sys := o.account(t, "SYS", false)
	o.sysPub, o.sysJWT = sys.pub, sys.jwt
	claims := jwt.NewOperatorClaims(pub)
	claims.Name = "workq test"
	claims.SystemAccount = sys.pub
	o.jwt, err = claims.Encode(kp)
	must(t, err)
	return o
}

// account makes an account of the operator named name, with unlimited JetStream if js.
func (o *operator) account(t *testing.T, name string, js bool) *account {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	must(t, err)
	pub, err := kp.PublicKey()
	must(t, err)
	claims := jwt.NewAccountClaims(pub)
	claims.Name = name
	if js {
		claims.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	}
	s, err := claims.Encode(o.kp)
	must(t, err)
	return &account{kp: kp, pub: pub, jwt: s}
}

// user makes a user of the account, expiring at expires if it is set, and returns its
// credentials file's contents.
func (a *account) user(t *testing.T, expires time.Time) []byte {
	t.Helper()
	return a.userWith(t, expires, jwt.Permissions{})
}

// userWith is user with the permissions p in the user's JWT.
func (a *account) userWith(t *testing.T, expires time.Time, p jwt.Permissions) []byte {
	t.Helper()
	kp, err := nkeys.CreateUser()
	must(t, err)
	pub, err := kp.PublicKey()
	must(t, err)
	claims := jwt.NewUserClaims(pub)
	claims.Permissions = p
	if !expires.IsZero() {
		claims.Expires = expires.Unix()
	}
	s, err := claims.Encode(a.kp)
	must(t, err)
	seed, err := kp.Seed()
	must(t, err)
	creds, err := jwt.FormatUserConfig(s, seed)
	must(t, err)
	return creds
}

// conf is the server configuration trusting the operator and its accounts.
func (o *operator) conf(accts ...*account) string {
	var preload strings.Builder
	fmt.Fprintf(&preload, "  %s: %q\n", o.sysPub, o.sysJWT)
	for _, a := range accts {
		fmt.Fprintf(&preload, "  %s: %q\n", a.pub, a.jwt)
	}
	return fmt.Sprintf("operator: %q\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n%s}\n", o.jwt, o.sysPub, preload.String())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
