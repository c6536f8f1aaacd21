package main_test

import (
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workq/workq/internal/testcert"
)

// `workq server` with --user/--password and --tls-cert/--tls-key serves only clients
// that present the credentials and trust the certificate, over TLS; its metrics still
// see the queues.
func TestServerAuthAndTLS(t *testing.T) {
	t.Parallel()
	cert, key, _ := testcert.SelfSigned(t)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	mport, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, "server", "--port", strconv.Itoa(port), "--data", t.TempDir(), "--metrics-addr", ":"+strconv.Itoa(mport),
		"--user", "u", "--password", "right", "--tls-cert", cert, "--tls-key", key)
	url := "tls://127.0.0.1:" + strconv.Itoa(port)
	waitFor(t, 20*time.Second, "server listening", func() bool { return strings.Contains(s.stdout(), "listening on "+url) })

	ok(t, "", "-s", url, "--user", "u", "--password", "right", "--tls-ca", cert, "enqueue", "secure", "x")
	oneLine(t, wq(t, "", "-s", url, "--user", "u", "--password", "wrong", "--tls-ca", cert, "queue", "ls"), 1, "refused the credentials")
	oneLine(t, wq(t, "", "-s", url, "--user", "u", "--password", "right", "queue", "ls"), 1, "certificate")
	waitFor(t, 20*time.Second, "the queue on /metrics", func() bool {
		code, b := scrape("http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics")
		n, _ := sample(b, "workq_queue_jobs", "queue", "secure")
		return code == http.StatusOK && n == 1
	})

	s.signal(t, syscall.SIGINT)
	if code := s.wait(t, 20*time.Second); code != 0 {
		t.Errorf("server exited %d; stderr: %s", code, s.stderr())
	}
}

func TestServerToken(t *testing.T) {
	t.Parallel()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, "server", "--port", strconv.Itoa(port), "--data", t.TempDir(), "--token", "s3cret")
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	waitFor(t, 20*time.Second, "server listening", func() bool { return strings.Contains(s.stdout(), "listening on "+url) })
	ok(t, "", "-s", url, "--token", "s3cret", "queue", "ls")
	oneLine(t, wq(t, "", "-s", url, "--token", "wrong", "queue", "ls"), 1, "refused the credentials")
	s.signal(t, syscall.SIGINT)
	if code := s.wait(t, 20*time.Second); code != 0 {
		t.Errorf("server exited %d; stderr: %s", code, s.stderr())
	}
}

func TestServerFlagErrors(t *testing.T) {
	t.Parallel()
	oneLine(t, wq(t, "", "server", "--user", "u"), 2, "--user and --password")
	oneLine(t, wq(t, "", "server", "--token", "t", "--user", "u", "--password", "p"), 2, "--token and --user")
	oneLine(t, wq(t, "", "server", "--tls-cert", "c.pem"), 2, "--tls-cert and --tls-key")
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	missing := t.TempDir() + "/missing.pem"
	oneLine(t, wq(t, "", "server", "--data", t.TempDir(), "--port", strconv.Itoa(port), "--tls-cert", missing, "--tls-key", missing), 1, "missing.pem")
}
