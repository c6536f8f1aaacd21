package perms_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/kvlock"
	"github.com/workq/workq/perms"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// denied runs attempt, a request or publish the user's permissions must refuse, and
// checks that the server refused subject (a permissions violation on the connection,
// naming it) and that attempt did not succeed.
func denied(t *testing.T, js jetstream.JetStream, what, subject string, attempt func(ctx context.Context) error) {
	t.Helper()
	nc := js.Conn()
	before := nc.LastError()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond) // no answer comes: the violation does
	defer cancel()
	err := attempt(ctx)
	if err == nil {
		err = nc.Flush() // a plain publish: the violation comes back after it
	}
	deadline := time.Now().Add(5 * time.Second)
	last := nc.LastError()
	for (last == before || !errors.Is(last, nats.ErrPermissionViolation)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		last = nc.LastError()
	}
	if last == before || !errors.Is(last, nats.ErrPermissionViolation) || !strings.Contains(last.Error(), `"`+subject+`"`) {
		t.Errorf("%s: err %v, connection's last error %v; want a permissions violation for %q", what, err, last, subject)
	}
}

// withJob makes queue q as operator adm and enqueues job id to it.
func withJob(t *testing.T, ctx context.Context, adm *admin.Admin, js jetstream.JetStream, q, id string) {
	t.Helper()
	if _, err := adm.CreateQueue(ctx, q, admin.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte(id), producer.ID(id)); err != nil {
		t.Fatal(err)
	}
}

// A worker of one queue cannot purge or delete its queue's stream or consumers,
// reach another queue's jobs or records, or listen to other queues' traffic; a
// producer cannot take jobs or write records. Each attempt is refused by the
// server, and nothing changes.
func TestRolesCannotOverstep(t *testing.T) {
	t.Parallel()
	s, _ := serve(t, map[string][]user{"TEAM": {
		{"op", perms.Operator, "", ""}, {"work", perms.Worker, "orders", ""}, {"prod", perms.Producer, "orders", ""},
	}})
	ctx := testenv.Context(t, 90*time.Second)
	opJS := login(t, s, "op")
	adm := operatorAdmin(t, s, "op")
	withJob(t, ctx, adm, opJS, "orders", "o1")
	withJob(t, ctx, adm, opJS, "payroll", "p1")
	// payroll's job ran once: its record is what a worker must not be able to touch.
	pw, err := consumer.New(ctx, opJS, "payroll", consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	pctx, stopP := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- pw.Run(pctx) }()
	waitState(t, adm, "payroll", "p1", producer.StateDone, 20*time.Second)
	stopP()
	<-ran
	withJob(t, ctx, adm, opJS, "payroll", "p2")

	work := login(t, s, "work")
	own, err := work.Stream(ctx, "WORKQ_orders")
	if err != nil {
		t.Fatalf("the worker reads its own stream's info: %v", err)
	}
	denied(t, work, "delete own stream", "$JS.API.STREAM.DELETE.WORKQ_orders", func(ctx context.Context) error {
		return work.DeleteStream(ctx, "WORKQ_orders")
	})
	denied(t, work, "purge own stream", "$JS.API.STREAM.PURGE.WORKQ_orders", func(ctx context.Context) error { return own.Purge(ctx) })
	denied(t, work, "delete own consumer", "$JS.API.CONSUMER.DELETE.WORKQ_orders.workers", func(ctx context.Context) error {
		return work.DeleteConsumer(ctx, "WORKQ_orders", "workers")
	})
	denied(t, work, "update own stream", "$JS.API.STREAM.UPDATE.WORKQ_orders", func(ctx context.Context) error {
		cfg := own.CachedInfo().Config
		cfg.MaxMsgs = 1
		_, err := work.UpdateStream(ctx, cfg)
		return err
	})
	denied(t, work, "delete own records bucket", "$JS.API.STREAM.DELETE.KV_WORKQ_orders_JOBS", func(ctx context.Context) error {
		return work.DeleteKeyValue(ctx, "WORKQ_orders_JOBS")
	})
	denied(t, work, "another queue's stream", "$JS.API.STREAM.INFO.WORKQ_payroll", func(ctx context.Context) error {
		_, err := work.Stream(ctx, "WORKQ_payroll")
		return err
	})
	denied(t, work, "pull another queue's job", "$JS.API.CONSUMER.MSG.NEXT.WORKQ_payroll.workers", func(ctx context.Context) error {
		_, err := work.Conn().RequestWithContext(ctx, "$JS.API.CONSUMER.MSG.NEXT.WORKQ_payroll.workers", []byte(`{"batch":1}`))
		return err
	})
	denied(t, work, "read another queue's record", "$JS.API.DIRECT.GET.KV_WORKQ_payroll_JOBS.$KV.WORKQ_payroll_JOBS.p1", func(ctx context.Context) error {
		_, err := work.Conn().RequestWithContext(ctx, "$JS.API.DIRECT.GET.KV_WORKQ_payroll_JOBS.$KV.WORKQ_payroll_JOBS.p1", nil)
		return err
	})
	denied(t, work, "write another queue's record", "$KV.WORKQ_payroll_JOBS.p1", func(context.Context) error {
		return work.Conn().Publish("$KV.WORKQ_payroll_JOBS.p1", []byte(`{"id":"p1","state":"dead"}`))
	})
	denied(t, work, "enqueue to another queue", "workq.payroll.jobs.x", func(context.Context) error {
		return work.Conn().Publish("workq.payroll.jobs.x", []byte("x"))
	})
	denied(t, work, "listen to another queue's jobs", "workq.payroll.>", func(context.Context) error {
		_, err := work.Conn().SubscribeSync("workq.payroll.>")
		return err
	})
	denied(t, work, "ack another queue's job", "$JS.ACK.WORKQ_payroll.workers.1.2.2.0.0", func(context.Context) error {
		return work.Conn().Publish("$JS.ACK.WORKQ_payroll.workers.1.2.2.0.0", []byte("+ACK"))
	})

	prod := login(t, s, "prod")
	denied(t, prod, "a producer pulls a job", "$JS.API.CONSUMER.MSG.NEXT.WORKQ_orders.workers", func(ctx context.Context) error {
		_, err := prod.Conn().RequestWithContext(ctx, "$JS.API.CONSUMER.MSG.NEXT.WORKQ_orders.workers", []byte(`{"batch":1}`))
		return err
	})
	denied(t, prod, "a producer marks a job done", "$KV.WORKQ_orders_JOBS.o1", func(context.Context) error {
		return prod.Conn().Publish("$KV.WORKQ_orders_JOBS.o1", []byte(`{"id":"o1","state":"done"}`))
	})
	denied(t, prod, "a producer purges the queue", "$JS.API.STREAM.PURGE.WORKQ_orders", func(ctx context.Context) error {
		s, err := prod.Stream(ctx, "WORKQ_orders")
		if err != nil {
			return err
		}
		return s.Purge(ctx)
	})

	// Through workq: a worker or producer of another queue fails at once, saying what
	// the server refused.
	start := time.Now()
	_, err = consumer.New(ctx, work, "payroll", consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }))
	if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), "WORKQ_payroll") {
		t.Errorf("a worker of orders works payroll: %v; want a permissions violation naming WORKQ_payroll", err)
	}
	if _, err := producer.New(ctx, work, "payroll"); !errors.Is(err, nats.ErrPermissionViolation) {
		t.Errorf("a worker of orders enqueues to payroll: %v; want a permissions violation", err)
	}
	if _, err := consumer.New(ctx, prod, "orders", consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil })); !errors.Is(err, nats.ErrPermissionViolation) {
		t.Errorf("a producer works its queue: %v; want a permissions violation", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the refused calls took %s: they waited rather than failed", d)
	}

	// Nothing changed.
	qi, err := adm.Queue(ctx, "orders")
	if err != nil || qi.Jobs != 1 {
		t.Errorf("queue orders: %+v, %v; want its job waiting", qi, err)
	}
	if r, err := adm.Job(ctx, "payroll", "p1"); err != nil || r.State != producer.StateDone {
		t.Errorf("payroll's job p1: %+v, %v; want done, as its worker left it", r, err)
	}
	if qi, err := adm.Queue(ctx, "payroll"); err != nil || qi.Jobs != 1 || qi.Running != 0 {
		t.Errorf("queue payroll: %+v, %v; want p2 alone waiting", qi, err)
	}
}

// A worker or producer whose queue does not exist, and whose user may not create
// it, fails with ErrNotProvisioned naming what is missing, rather than waiting.
func TestMissingQueueSaysWhoCreatesIt(t *testing.T) {
	t.Parallel()
	s, _ := serve(t, map[string][]user{"TEAM": {{"work", perms.Worker, "ghost", ""}, {"prod", perms.Producer, "ghost", ""}}})
	ctx := testenv.Context(t, 60*time.Second)
	_, err := consumer.New(ctx, login(t, s, "work"), "ghost", consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }))
	if !errors.Is(err, consumer.ErrNotProvisioned) || !strings.Contains(err.Error(), `"$JS.API.STREAM.CREATE.WORKQ_ghost"`) ||
		!strings.Contains(err.Error(), "workq queue create") {
		t.Errorf("worker of a missing queue: %v; want ErrNotProvisioned naming the refused creation of WORKQ_ghost and 'workq queue create'", err)
	}
	if _, err := producer.New(ctx, login(t, s, "prod"), "ghost"); !errors.Is(err, producer.ErrNotProvisioned) {
		t.Errorf("producer of a missing queue: %v; want ErrNotProvisioned", err)
	}
}

// Two accounts each have a queue named orders: each account's workers run its own
// jobs only, and neither sees the other's jobs or records.
func TestAccountsKeepSameNamedQueuesApart(t *testing.T) {
	t.Parallel()
	s, _ := serve(t, map[string][]user{
		"RED":  {{"red-op", perms.Operator, "", ""}, {"red-work", perms.Worker, "orders", ""}},
		"BLUE": {{"blue-op", perms.Operator, "", ""}, {"blue-work", perms.Worker, "orders", ""}},
	})
	ctx := testenv.Context(t, 60*time.Second)
	red, blue := operatorAdmin(t, s, "red-op"), operatorAdmin(t, s, "blue-op")
	withJob(t, ctx, red, login(t, s, "red-op"), "orders", "red-1")
	withJob(t, ctx, blue, login(t, s, "blue-op"), "orders", "blue-1")

	for _, c := range []struct {
		worker, mine, theirs string
		adm                  *admin.Admin
	}{{"red-work", "red-1", "blue-1", red}, {"blue-work", "blue-1", "red-1", blue}} {
		ran := make(chan string, 10)
		w, err := consumer.New(ctx, login(t, s, c.worker), "orders", consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
			ran <- j.ID()
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		go func() { _ = w.Run(wctx) }()
		waitState(t, c.adm, "orders", c.mine, producer.StateDone, 20*time.Second)
		stop()
		close(ran)
		for id := range ran {
			if id != c.mine {
				t.Errorf("%s ran %s", c.worker, id)
			}
		}
		if _, err := c.adm.Job(ctx, "orders", c.theirs); !errors.Is(err, producer.ErrNotFound) {
			t.Errorf("%s's operator looks up %s: %v; want ErrNotFound", c.worker, c.theirs, err)
		}
		if qs, err := c.adm.Queues(ctx); err != nil || len(qs) != 1 || qs[0].Jobs != 0 {
			t.Errorf("%s's queues: %+v, %v; want orders alone, empty", c.worker, qs, err)
		}
	}
}

// A lock user holds, waits on and releases locks in its bucket, which an operator
// created, and can use no other bucket.
func TestLockUserRole(t *testing.T) {
	t.Parallel()
	s, v := serve(t, map[string][]user{"TEAM": {{"op", perms.Operator, "", ""}, {"locks", perms.LockUser, "app-locks", ""}}})
	ctx := testenv.Context(t, 60*time.Second)
	if _, err := kvlock.New(ctx, login(t, s, "op"), kvlock.Bucket("app-locks")); err != nil {
		t.Fatalf("operator creates the bucket: %v", err)
	}
	js := login(t, s, "locks")
	a, err := kvlock.New(ctx, js, kvlock.Bucket("app-locks"), kvlock.Owner("a"))
	if err != nil {
		t.Fatalf("lock user opens its bucket: %v", err)
	}
	b, err := kvlock.New(ctx, login(t, s, "locks"), kvlock.Bucket("app-locks"), kvlock.Owner("b"))
	if err != nil {
		t.Fatal(err)
	}
	held, err := a.Acquire(ctx, "invoice-7")
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		lk, err := b.Acquire(ctx, "invoice-7") // waits on a watch for the release
		if err == nil {
			err = lk.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := held.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock within 10s of its release")
	}
	if lines := v.all(); len(lines) > 0 {
		t.Errorf("the server denied the lock user:\n%s", strings.Join(lines, "\n"))
	}
	if _, err := kvlock.New(ctx, js, kvlock.Bucket("other-locks")); !errors.Is(err, nats.ErrPermissionViolation) {
		t.Errorf("lock user opens another bucket: %v; want a permissions violation", err)
	}
}
