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

// workq server --config takes users with permissions and accounts from a
// nats-server configuration file: here the roles `workq perms` prints.
func TestServerConfigFile(t *testing.T) {
	t.Parallel()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	conf := tempFile(t, "server.conf", rolesConfig(t))
	s := start(t, "server", "--port", strconv.Itoa(port), "--data", t.TempDir(), "--config", conf)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	waitFor(t, 20*time.Second, "server listening", func() bool { return strings.Contains(s.stdout(), "listening on "+url) })
	if !strings.Contains(s.stdout(), "config: "+conf) {
		t.Errorf("the server does not say where its users come from: %s", s.stdout())
	}
	if r := as(t, url, "op", "queue", "create", "orders"); r.code != 0 {
		t.Fatalf("queue create as the operator: %s", r.stderr)
	}
	if r := as(t, url, "prod", "enqueue", "orders", "x"); r.code != 0 {
		t.Fatalf("enqueue as the producer: %s", r.stderr)
	}
	oneLine(t, as(t, url, "prod", "queue", "purge", "orders", "--yes"), 1, "permissions violation")
	oneLine(t, wq(t, "", "-s", url, "--user", "op", "--password", "wrong", "queue", "ls"), 1, "refused the credentials")
	oneLine(t, wq(t, "", "-s", url, "queue", "ls"), 1, "refused the credentials")
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
	oneLine(t, wq(t, "", "server", "--config", t.TempDir()+"/none.conf"), 2, "--config", "none.conf")
	conf := tempFile(t, "users.conf", "authorization: { users: [ { user: a, password: b } ] }\n")
	oneLine(t, wq(t, "", "server", "--config", conf, "--metrics-addr", ":0"), 2, "--metrics-addr and --config")

	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	oneLine(t, wq(t, "", "server", "--data", t.TempDir(), "--port", strconv.Itoa(port), "--config", conf, "--user", "u", "--password", "p"), 1, "not together with UserPassword")
	bad := tempFile(t, "bad.conf", "authorization: { users: [ { user: a \n")
	oneLine(t, wq(t, "", "server", "--data", t.TempDir(), "--port", strconv.Itoa(port), "--config", bad), 1, "bad.conf")
	missing := t.TempDir() + "/missing.pem"
	oneLine(t, wq(t, "", "server", "--data", t.TempDir(), "--port", strconv.Itoa(port), "--tls-cert", missing, "--tls-key", missing), 1, "missing.pem")
}
