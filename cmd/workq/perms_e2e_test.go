package main_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rolesConfig is a nats-server configuration whose account TEAM has users op, prod,
// work and ghost (each user's password is its name) with the permissions `workq
// perms` prints for the operator, a producer and a worker of queue orders, and a
// worker of queue ghost.
func rolesConfig(t *testing.T) string {
	t.Helper()
	var users strings.Builder
	for _, u := range []struct{ name, role, queue string }{{"op", "operator", ""}, {"prod", "producer", "orders"}, {"work", "worker", "orders"}, {"ghost", "worker", "ghost"}} {
		args := []string{"perms", "--role", u.role}
		if u.queue != "" {
			args = append(args, u.queue)
		}
		block := ok(t, "", args...)
		fmt.Fprintf(&users, "{ user: %q, password: %q\n%s}\n", u.name, u.name, block)
	}
	return fmt.Sprintf("accounts: { TEAM: { jetstream: enabled, users: [\n%s] } }\n", users.String())
}

// tempFile writes content to a new file named name in a test directory.
func tempFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	writeFile(t, path, content)
	return path
}

// rolesServer starts a nats-server process with rolesConfig and returns its URL.
func rolesServer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	conf := fmt.Sprintf("jetstream: { store_dir: %q }\n%s", filepath.Join(dir, "js"), rolesConfig(t))
	srv, url, err := startNATS(dir, "-c", tempFile(t, "server.conf", conf))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(srv) })
	return url
}

// as runs workq as user (password the same) on the server at url.
func as(t *testing.T, url, user string, args ...string) result {
	t.Helper()
	return wqEnv(t, []string{"NATS_URL=" + url, "NATS_USER=" + user, "NATS_PASSWORD=" + user}, "", args...)
}

// With the permissions `workq perms` prints, an operator creates a queue, a producer
// fills it and a worker runs it with `workq work`; what a role may not do fails at
// once with one line naming the subject the server refused.
func TestPermsRolesFromTheCLI(t *testing.T) {
	t.Parallel()
	url := rolesServer(t)
	must := func(r result, what string) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", what, r.code, r.stderr)
		}
		return r.stdout
	}
	if out := must(as(t, url, "op", "queue", "create", "orders", "--ack-wait", "2s"), "queue create"); !strings.Contains(out, "queue orders is ready: ack wait 2s") {
		t.Errorf("queue create said %q", out)
	}
	must(as(t, url, "op", "queue", "create", "orders", "--ack-wait", "2s"), "queue create again (idempotent)")
	must(as(t, url, "prod", "enqueue", "orders", "--id", "j1", "hello"), "enqueue")
	must(as(t, url, "prod", "enqueue", "orders", "--id", "j2", "--max-attempts", "1", "doomed"), "enqueue")

	w := start(t, "work", "orders", "--ack-wait", "2s", "--server", url, "--user", "work", "--password", "work", "--",
		"sh", "-c", `read p; [ "$p" = doomed ] && exit 1; sleep 1.5; echo "did $p"`)
	defer func() {
		if t.Failed() {
			t.Logf("worker stderr: %s", w.stderr())
		}
	}()
	waitFor(t, 30*time.Second, "j1 done and j2 dead", func() bool {
		out := as(t, url, "op", "job", "get", "orders", "j1").stdout + as(t, url, "op", "job", "get", "orders", "j2").stdout
		return strings.Contains(out, "done") && strings.Contains(out, "dead")
	})
	w.stop(t)
	if strings.Contains(w.stderr(), "iolation") {
		t.Errorf("the worker was denied something: %s", w.stderr())
	}
	if out := as(t, url, "op", "job", "get", "orders", "j1").stdout; !strings.Contains(out, "did hello") {
		t.Errorf("job j1: %s; want its result", out)
	}

	for _, c := range []struct {
		user    string
		args    []string
		subject string
	}{
		{"work", []string{"queue", "purge", "orders", "--yes"}, "$JS.API.STREAM.PURGE.WORKQ_orders"},
		{"work", []string{"queue", "rm", "orders", "--yes"}, "$JS.API.STREAM.DELETE.WORKQ_orders"},
		{"work", []string{"enqueue", "payroll", "x"}, "$JS.API.STREAM.INFO.WORKQ_payroll"},
		{"prod", []string{"work", "orders", "--", "true"}, "$JS.API.CONSUMER.INFO.WORKQ_orders.workers"},
		{"prod", []string{"dlq", "purge", "orders", "--yes"}, "$JS.API.STREAM.PURGE.WORKQ_orders_DEAD"},
	} {
		r := as(t, url, c.user, c.args...)
		oneLine(t, r, 1, "permissions violation", c.subject)
		if r.took > 10*time.Second {
			t.Errorf("%s %v took %s: it waited instead of failing", c.user, c.args, r.took)
		}
	}
	if out := as(t, url, "op", "queue", "info", "orders").stdout; !strings.Contains(out, "orders") {
		t.Errorf("queue info after the refused calls: %s", out)
	}

	// A worker whose queue nobody created says who creates it.
	r := as(t, url, "ghost", "work", "ghost", "--", "true")
	oneLine(t, r, 1, "queue not provisioned", "$JS.API.STREAM.CREATE.WORKQ_ghost", "workq queue create")
}

func TestPermsFlagErrors(t *testing.T) {
	t.Parallel()
	oneLine(t, wq(t, "", "perms", "orders"), 2, "--role is required")
	oneLine(t, wq(t, "", "perms", "orders", "--role", "admin"), 2, "unknown role", "producer, worker, operator, lock-user")
	oneLine(t, wq(t, "", "perms", "--role", "worker"), 2, "name the queue")
	oneLine(t, wq(t, "", "perms", "--role", "lock-user"), 2, "name the lock bucket")
	oneLine(t, wq(t, "", "perms", "orders", "--role", "operator"), 2, "takes no queue")
	oneLine(t, wq(t, "", "perms", "a.b", "--role", "worker"), 2, "a.b")
	oneLine(t, wq(t, "", "perms", "orders", "--role", "worker", "--format", "yaml"), 2, "--format")
	oneLine(t, wq(t, "", "perms", "orders", "--role", "worker", "--inbox-prefix", "_INBOX.*"), 2, "inbox prefix")
	oneLine(t, wq(t, "", "queue", "create", "q", "--ack-wait", "10ms"), 2, "--ack-wait 10ms")
	oneLine(t, wq(t, "", "queue", "create", "q", "--replicas", "0"), 2, "--replicas 0")
	if out := ok(t, "", "perms", "orders", "--role", "worker", "--format", "nsc", "--inbox-prefix", "_INBOX_w1"); !strings.Contains(out, "--allow-sub '_INBOX_w1.>'") {
		t.Errorf("nsc format: %s", out)
	}
}
