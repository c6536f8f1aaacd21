package admin_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Info counts the queue's jobs apart from its delayed jobs and periodic schedules,
// which share its stream, and the oldest job is a job, not a schedule.
func TestInfoCountsSchedulesApart(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p, err := producer.New(ctx, js, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Schedule(ctx, "nightly", "0 2 * * *", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("later"), producer.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the schedules are measurably older than the job
	job, err := p.Enqueue(ctx, []byte("now"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := adm(t, js).Queue(ctx, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Status(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if q.Jobs != 1 || q.Pending != 1 || q.Scheduled != 1 || q.Schedules != 1 || !q.FirstJob.Equal(st.EnqueuedAt) {
		t.Fatalf("info %+v; want 1 job (stored %v), 1 scheduled, 1 schedule", q, st.EnqueuedAt)
	}
}

// Purge removes the queue's jobs, delayed ones included, and keeps its periodic
// schedules: they are the queue's configuration, not its backlog.
func TestPurgeKeepsSchedules(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p, err := producer.New(ctx, js, "purged")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Schedule(ctx, "nightly", "0 2 * * *", nil); err != nil {
		t.Fatal(err)
	}
	for _, opt := range []producer.EnqueueOption{nil, producer.After(time.Hour), producer.ID("with-id")} {
		if _, err := p.Enqueue(ctx, []byte("x"), opt); err != nil {
			t.Fatal(err)
		}
	}
	n, err := adm(t, js).PurgeQueue(ctx, "purged")
	if err != nil || n != 3 {
		t.Fatalf("Purge = %d, %v; want 3 jobs", n, err)
	}
	q, err := adm(t, js).Queue(ctx, "purged")
	if err != nil {
		t.Fatal(err)
	}
	if q.Jobs != 0 || q.Scheduled != 0 || q.Schedules != 1 {
		t.Fatalf("after purge: %+v; want the schedule only", q)
	}
	if _, err := p.GetSchedule(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
}

// Every call on a queue that does not exist is ErrNoQueue and creates nothing; a nil
// context or an invalid name is refused, not a panic.
func TestCallsOnAMissingQueue(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	a := adm(t, js)
	ctx := testenv.Context(t, 20*time.Second)
	calls := map[string]func() error{
		"Queue":          func() error { _, err := a.Queue(ctx, "ghost"); return err },
		"Job":            func() error { _, err := a.Job(ctx, "ghost", "x"); return err },
		"CancelJob":      func() error { _, err := a.CancelJob(ctx, "ghost", "x"); return err },
		"Schedules":      func() error { _, err := a.Schedules(ctx, "ghost"); return err },
		"DeadLetters":    func() error { _, err := a.DeadLetters(ctx, "ghost", 0, false); return err },
		"PurgeQueue":     func() error { _, err := a.PurgeQueue(ctx, "ghost"); return err },
		"PauseQueue":     func() error { return a.PauseQueue(ctx, "ghost") },
		"DeleteQueue":    func() error { return a.DeleteQueue(ctx, "ghost") },
		"Workflow":       func() error { _, err := a.Workflow(ctx, "ghost", "x"); return err },
		"Workflows":      func() error { _, err := a.Workflows(ctx, "ghost"); return err },
		"WaitWorkflow":   func() error { _, err := a.WaitWorkflow(ctx, "ghost", "x"); return err },
		"CancelWorkflow": func() error { _, err := a.CancelWorkflow(ctx, "ghost", "x"); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, admin.ErrNoQueue) {
			t.Errorf("%s: %v; want ErrNoQueue", name, err)
		}
	}
	if qs, err := a.Queues(ctx); err != nil || len(qs) != 0 {
		t.Errorf("Queues after calls on a missing queue: %v, %v", qs, err)
	}
	//lint:ignore SA1012 a nil context is what is tested
	if _, err := a.Queue(nil, "ghost"); !errors.Is(err, producer.ErrInvalidOption) { //nolint:staticcheck
		t.Errorf("nil context: %v", err)
	}
	if _, err := a.Queue(ctx, "no spaces"); !errors.Is(err, producer.ErrInvalidName) {
		t.Errorf("invalid name: %v", err)
	}
	if _, err := admin.New(nil); !errors.Is(err, producer.ErrInvalidOption) {
		t.Errorf("New(nil): %v", err)
	}
}

// DeleteQueue removes every object of the queue, the unique keys' bucket and the
// limits' slots and rate limiter included.
func TestDeleteQueueRemovesEverything(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	a := adm(t, js)
	ctx := testenv.Context(t, 30*time.Second)
	const q = "doomed"
	p, err := producer.New(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("x"), producer.Unique("once")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetLimits(ctx, q, admin.Limits{MaxRunning: 2, Rate: 10, RateWindow: admin.Duration(time.Second)}); err != nil {
		t.Fatal(err)
	}
	// A worker creates the limits' bucket and limiter when it reads the limits.
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }),
		consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	_ = w
	streams := []string{"WORKQ_" + q, "WORKQ_" + q + "_DEAD", "KV_WORKQ_" + q + "_JOBS", "KV_WORKQ_" + q + "_UNIQUE", "KV_WORKQ_" + q + "_LIMITS", "WORKQ_LIMIT_queue-" + q}
	for _, s := range streams[2:] {
		if _, err := js.Stream(ctx, s); err != nil {
			t.Fatalf("before DeleteQueue, stream %s: %v", s, err)
		}
	}
	if err := a.DeleteQueue(ctx, q); err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		if _, err := js.Stream(ctx, s); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("after DeleteQueue, stream %s: %v", s, err)
		}
	}
}
