package perms_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/embedded"
	"github.com/workq/workq/perms"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// user is a user of the test server's config: name (its password too) and role on
// the name given.
type user struct {
	name  string
	role  perms.Role
	on    string
	inbox string // the user's own inbox prefix; "" for the shared _INBOX
}

// violations collects the server's log lines about permissions.
type violations struct {
	mu    sync.Mutex
	lines []string
}

func (v *violations) Enabled(context.Context, slog.Level) bool { return true }
func (v *violations) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(strings.ToLower(r.Message), "violation") {
		v.mu.Lock()
		v.lines = append(v.lines, r.Message)
		v.mu.Unlock()
	}
	return nil
}
func (v *violations) WithAttrs([]slog.Attr) slog.Handler { return v }
func (v *violations) WithGroup(string) slog.Handler      { return v }

func (v *violations) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.lines...)
}

// serve starts a server whose accounts (name → users) have JetStream and whose users
// have the permissions perms.For gives their roles, written as Config prints them.
func serve(t *testing.T, accounts map[string][]user) (*embedded.Server, *violations) {
	t.Helper()
	var b strings.Builder
	b.WriteString("accounts: {\n")
	for acc, users := range accounts {
		fmt.Fprintf(&b, "  %s: {\n    jetstream: enabled\n    users: [\n", acc)
		for _, u := range users {
			var opts []perms.Option
			if u.inbox != "" {
				opts = append(opts, perms.Inbox(u.inbox))
			}
			p, err := perms.For(u.role, u.on, opts...)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "      {\n        user: %q, password: %q\n        %s      }\n", u.name, u.name, p.Config())
		}
		b.WriteString("    ]\n  }\n")
	}
	b.WriteString("}\n")
	conf := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	v := &violations{}
	s, err := embedded.Run(embedded.ConfigFile(conf), embedded.TmpfsStore(), embedded.Logger(slog.New(v)))
	if err != nil {
		t.Fatalf("run server with\n%s: %v", b.String(), err)
	}
	t.Cleanup(s.Close)
	return s, v
}

// login connects as user name.
func login(t *testing.T, s *embedded.Server, name string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	opts = append(opts, nats.UserInfo(name, name), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	nc, err := nats.Connect(s.URL(), opts...)
	if err != nil {
		t.Fatalf("connect as %s: %v", name, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func operatorAdmin(t *testing.T, s *embedded.Server, name string) *admin.Admin {
	t.Helper()
	adm, err := admin.New(login(t, s, name))
	if err != nil {
		t.Fatal(err)
	}
	return adm
}

// waitState waits until job id of queue q is in state, as the operator reads it.
func waitState(t *testing.T, adm *admin.Admin, q, id string, state producer.State, within time.Duration) *admin.Record {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := adm.Job(testenv.Context(t, 5*time.Second), q, id)
		if err == nil && r.State == state {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: record %+v (err %v), want state %s within %s", id, r, err, state, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A worker with only the worker role, and a producer with only the producer role,
// run a queue an operator created: jobs that succeed, retry, die, run for longer than
// AckWait on heartbeats, wait for their time, jump the line, hold a unique key, and
// run one at a time under the queue's limits (waiting on a watch for the slot); the
// producer reads its jobs' records and waits for their end.
// The server denies neither of them anything; the worker, whose replies come to an
// inbox prefix of its own, cannot listen to the shared one.
func TestRolesRunAQueueEndToEnd(t *testing.T) {
	t.Parallel()
	s, v := serve(t, map[string][]user{"TEAM": {
		{"op", perms.Operator, "", ""}, {"prod", perms.Producer, "orders", ""}, {"work", perms.Worker, "orders", "_INBOX_work"},
	}})
	ctx := testenv.Context(t, 90*time.Second)
	adm := operatorAdmin(t, s, "op")
	if _, err := adm.CreateQueue(ctx, "orders", admin.QueueOptions{AckWait: time.Second}); err != nil {
		t.Fatalf("operator creates the queue: %v", err)
	}
	if _, err := adm.SetLimits(ctx, "orders", admin.Limits{MaxRunning: 1, Rate: 100, RateWindow: admin.Duration(time.Second)}); err != nil {
		t.Fatalf("operator sets limits: %v", err)
	}

	p, err := producer.New(ctx, login(t, s, "prod"), "orders")
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	for _, j := range []struct {
		id   string
		opts []producer.EnqueueOption
	}{
		{"ok", nil}, {"flaky", nil}, {"poison", []producer.EnqueueOption{producer.MaxAttempts(2)}},
		{"long", nil}, {"later", []producer.EnqueueOption{producer.After(time.Second)}},
		{"urgent", []producer.EnqueueOption{producer.Priority(producer.PriorityUrgent)}},
		{"once", []producer.EnqueueOption{producer.Unique("customer-7")}},
	} {
		if _, err := p.Enqueue(ctx, []byte(j.id), append(j.opts, producer.ID(j.id))...); err != nil {
			t.Fatalf("enqueue %s: %v", j.id, err)
		}
	}
	if info, err := p.Enqueue(ctx, []byte("again"), producer.ID("once-again"), producer.Unique("customer-7")); err != nil || !info.Duplicate || info.ID != "once" {
		t.Fatalf("a second job with unique key customer-7: %+v, %v; want a duplicate of job once", info, err)
	}

	var flaky atomic.Int32
	work := login(t, s, "work", nats.CustomInboxPrefix("_INBOX_work"))
	w, err := consumer.New(ctx, work, "orders", consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		switch j.ID() {
		case "flaky":
			if flaky.Add(1) == 1 {
				return errors.New("first try fails")
			}
		case "poison":
			return errors.New("always fails")
		case "long":
			select { // three AckWaits: only heartbeats keep the job
			case <-time.After(3 * time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		j.SetResult([]byte("did " + j.ID()))
		return nil
	}), consumer.AckWait(time.Second), consumer.Backoff(consumer.Constant(100*time.Millisecond)), consumer.Concurrency(4))
	if err != nil {
		t.Fatalf("worker: %v", err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker Run: %v", err)
		}
	}()

	for _, id := range []string{"ok", "flaky", "long", "later", "urgent", "once"} {
		r := waitState(t, adm, "orders", id, producer.StateDone, 30*time.Second)
		want := 1
		if id == "flaky" {
			want = 2
		}
		if r.Attempt != want || string(r.Result) != "did "+id {
			t.Errorf("job %s: attempt %d, result %q; want attempt %d, result %q", id, r.Attempt, r.Result, want, "did "+id)
		}
	}
	waitState(t, adm, "orders", "poison", producer.StateDead, 30*time.Second)
	if r, err := p.Status(ctx, "ok"); err != nil || r.State != producer.StateDone {
		t.Errorf("the producer reads its job's status: %+v, %v; want done", r, err)
	}
	if r, err := p.Wait(ctx, "flaky"); err != nil || r.State != producer.StateDone {
		t.Errorf("the producer waits for its job's end (a watch of its record): %+v, %v; want done", r, err)
	}
	// The record says dead before the worker publishes the dead letter: wait for it.
	var dead []admin.DeadLetter
	testenv.Eventually(t, 10*time.Second, "poison's dead letter", func() bool {
		if dead, err = adm.DeadLetters(ctx, "orders", 10, false); err != nil {
			t.Fatalf("dead letters: %v", err)
		}
		return len(dead) != 0
	})
	if len(dead) != 1 || dead[0].JobID != "poison" {
		t.Fatalf("dead letters %+v; want poison's", dead)
	}
	if st := w.Stats(); st.Reassigned != 0 {
		t.Errorf("stats %+v: a job was reassigned (a heartbeat failed?)", st)
	}
	if got := v.all(); len(got) > 0 {
		t.Errorf("the server denied the roles %d requests:\n%s", len(got), strings.Join(got, "\n"))
	}
	// The worker's replies come to its own inbox prefix: it cannot listen to the
	// shared one, where the other users' replies go.
	denied(t, work, "listen to the shared inbox", "_INBOX.>", func(context.Context) error {
		_, err := work.Conn().SubscribeSync("_INBOX.>")
		return err
	})
}
