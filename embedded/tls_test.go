package embedded_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/embedded"
	"github.com/workq/workq/internal/testcert"
	"github.com/workq/workq/testenv"
)

// wantTLS checks that clients of s must use TLS: one that trusts the certificate
// connects (and uses JetStream), one that does not, or that refuses TLS, cannot.
func wantTLS(t *testing.T, s *embedded.Server, roots *x509.CertPool) {
	t.Helper()
	if !strings.HasPrefix(s.URL(), "tls://") {
		t.Errorf("URL %s: want tls://", s.URL())
	}
	nc, err := nats.Connect(s.URL(), nats.Secure(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatalf("connect with TLS: %v", err)
	}
	defer nc.Close()
	if cs, err := nc.TLSConnectionState(); err != nil || !cs.HandshakeComplete {
		t.Fatalf("connection TLS state: %v, %+v", err, cs)
	}
	if _, err := jetStream(t, s.URL(), nats.Secure(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})).AccountInfo(testenv.Context(t, 10*time.Second)); err != nil {
		t.Fatalf("JetStream over TLS: %v", err)
	}
	if nc, err := nats.Connect(s.URL(), nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("connected without trusting the certificate")
	}
	// The server tells every client that TLS is required.
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.URL(), "tls://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	info, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(info, `"tls_required":true`) {
		t.Fatalf("server's INFO %q (%v): want tls_required", info, err)
	}
}

func TestTLSFiles(t *testing.T) {
	t.Parallel()
	cert, key, roots := testcert.SelfSigned(t)
	s := run(t, embedded.TLSFiles(cert, key), embedded.TmpfsStore())
	wantTLS(t, s, roots)
}

func TestTLSConfig(t *testing.T) {
	t.Parallel()
	cert, key, roots := testcert.SelfSigned(t)
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	s := run(t, embedded.TLS(&tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}), embedded.TmpfsStore())
	wantTLS(t, s, roots)
}

// ConfigFile brings users and TLS with client certificates from a nats-server
// configuration: a client with a certificate of the CA and the user's password gets
// in and uses JetStream; one without a certificate, or with the wrong password, does
// not; the listen address and store stay with the options.
func TestConfigFileUsersAndMutualTLS(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "workq test CA")
	cert, key := ca.Server(t)
	clientCert, clientKey := ca.Client(t, "worker-1")
	conf := filepath.Join(t.TempDir(), "server.conf")
	text := fmt.Sprintf(`
listen: "127.0.0.1:1"  # the options' port wins
tls: { cert_file: %q, key_file: %q, ca_file: %q, verify: true }
authorization: { users: [ { user: w, password: secret } ] }
`, cert, key, ca.File)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	s := run(t, embedded.ConfigFile(conf), embedded.TmpfsStore())
	if !strings.HasPrefix(s.URL(), "tls://127.0.0.1:") || strings.HasSuffix(s.URL(), ":1") {
		t.Errorf("URL %s: want tls:// on the options' address", s.URL())
	}
	good := []nats.Option{nats.UserInfo("w", "secret"), nats.ClientCert(clientCert, clientKey), nats.RootCAs(ca.File), nats.Timeout(3 * time.Second)}
	if _, err := jetStream(t, s.URL(), good...).AccountInfo(testenv.Context(t, 10*time.Second)); err != nil {
		t.Fatalf("JetStream with the certificate and the password: %v", err)
	}
	for name, bad := range map[string][]nats.Option{
		"no client certificate": {nats.UserInfo("w", "secret"), nats.RootCAs(ca.File), nats.Timeout(3 * time.Second)},
		"wrong password":        {nats.UserInfo("w", "wrong"), nats.ClientCert(clientCert, clientKey), nats.RootCAs(ca.File), nats.Timeout(3 * time.Second)},
	} {
		if nc, err := nats.Connect(s.URL(), bad...); err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
		}
	}
	if _, err := embedded.Run(embedded.ConfigFile(conf), embedded.Token("t")); !errors.Is(err, embedded.ErrInvalidOption) {
		t.Errorf("ConfigFile with users and Token: %v; want ErrInvalidOption", err)
	}
	if _, err := embedded.Run(embedded.ConfigFile(filepath.Join(t.TempDir(), "none.conf"))); !errors.Is(err, embedded.ErrInvalidOption) {
		t.Errorf("a missing ConfigFile: %v; want ErrInvalidOption", err)
	}
}
