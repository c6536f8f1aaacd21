package embedded_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"net"
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
	s := run(t, embedded.TLSFiles(cert, key), embedded.MemoryStore())
	wantTLS(t, s, roots)
}

func TestTLSConfig(t *testing.T) {
	t.Parallel()
	cert, key, roots := testcert.SelfSigned(t)
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	s := run(t, embedded.TLS(&tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}), embedded.MemoryStore())
	wantTLS(t, s, roots)
}
