package main_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
)

// rolesConfig is a nats-server configuration whose account TEAM has users op, prod,
// work and ghost (each user's password is its name) with the permissions `workq
// perms` prints for the operator, a producer and a worker of queue orders, and a
// worker of queue ghost. The worker work's replies come to an inbox prefix of its own,
// inboxes[work].
func rolesConfig(t *testing.T) string {
	t.Helper()
	var users strings.Builder
	for _, u := range []struct{ name, role, queue string }{{"op", "operator", ""}, {"prod", "producer", "orders"}, {"work", "worker", "orders"}, {"ghost", "worker", "ghost"}} {
		args := []string{"perms", "--role", u.role}
		if u.queue != "" {
			args = append(args, u.queue)
		}
		if inbox := inboxes[u.name]; inbox != "" {
			args = append(args, "--inbox-prefix", inbox)
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

// inboxes are the inbox prefixes of rolesConfig's users that have their own.
var inboxes = map[string]string{"work": "_INBOX_work"}

// as runs workq as user (password the same, and its inbox prefix) on the server at url.
func as(t *testing.T, url, user string, args ...string) result {
	t.Helper()
	return wqEnv(t, []string{"NATS_URL=" + url, "NATS_USER=" + user, "NATS_PASSWORD=" + user, "NATS_INBOX_PREFIX=" + inboxes[user]}, "", args...)
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

	w := start(t, "work", "orders", "--ack-wait", "2s", "--server", url, "--user", "work", "--password", "work", "--inbox-prefix", inboxes["work"], "--",
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

	// A user whose replies come to an inbox of its own, connecting without it, is told.
	r := wqEnv(t, []string{"NATS_URL=" + url, "NATS_USER=work", "NATS_PASSWORD=work"}, "", "queue", "info", "orders")
	oneLine(t, r, 1, "permissions violation", "--inbox-prefix")

	// A worker whose queue nobody created says who creates it.
	r = as(t, url, "ghost", "work", "ghost", "--", "true")
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
	oneLine(t, wq(t, "", "queue", "ls", "--inbox-prefix", "_INBOX.>"), 2, "--inbox-prefix", "invalid inbox prefix")
	oneLine(t, wq(t, "", "queue", "create", "q", "--replicas", "0"), 2, "--replicas 0")
	if out := ok(t, "", "perms", "orders", "--role", "worker", "--format", "nsc", "--inbox-prefix", "_INBOX_w1"); !strings.Contains(out, "--allow-sub '_INBOX_w1.>'") {
		t.Errorf("nsc format: %s", out)
	}
}

// The JSON that `workq perms --format json` prints makes user JWTs: with an operator's
// and a worker's, in an account of a JWT operator, the operator creates and fills a
// queue, the worker runs it, and the worker cannot purge it.
func TestPermsForJWTUsers(t *testing.T) {
	t.Parallel()
	op := newOperator(t)
	acct := op.account(t, "TEAM", true)
	creds := func(args ...string) string {
		var p jwt.Permissions
		must(t, json.Unmarshal([]byte(ok(t, "", append([]string{"perms", "--format", "json"}, args...)...)), &p))
		return tempFile(t, "user.creds", string(acct.userWith(t, time.Time{}, p)))
	}
	opCreds, workCreds := creds("--role", "operator"), creds("orders", "--role", "worker")
	dir := t.TempDir()
	conf := fmt.Sprintf("jetstream: { store_dir: %q }\n%s", filepath.Join(dir, "js"), op.conf(acct))
	srv, url, err := startNATS(dir, "-c", tempFile(t, "server.conf", conf))
	must(t, err)
	t.Cleanup(func() { stopProcess(srv) })
	with := func(creds string, args ...string) result {
		return wqEnv(t, []string{"NATS_URL=" + url, "NATS_CREDS=" + creds}, "", args...)
	}
	for _, args := range [][]string{{"queue", "create", "orders"}, {"enqueue", "orders", "--id", "j1", "hi"}} {
		if r := with(opCreds, args...); r.code != 0 {
			t.Fatalf("operator: %v: %s", args, r.stderr)
		}
	}
	w := start(t, "work", "orders", "--server", url, "--creds", workCreds, "--", "cat")
	waitFor(t, 30*time.Second, "j1 done", func() bool {
		return strings.Contains(with(opCreds, "job", "get", "orders", "j1").stdout, "done")
	})
	w.stop(t)
	oneLine(t, with(workCreds, "queue", "purge", "orders", "--yes"), 1, "permissions violation", "$JS.API.STREAM.PURGE.WORKQ_orders")
}
