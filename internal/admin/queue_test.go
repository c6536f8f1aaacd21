package admin_test

import (
	"testing"
	"time"

	"github.com/workq/workq/internal/admin"
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
	q, err := admin.Info(ctx, js, "mixed")
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
	n, err := admin.Purge(ctx, js, "purged")
	if err != nil || n != 3 {
		t.Fatalf("Purge = %d, %v; want 3 jobs", n, err)
	}
	q, err := admin.Info(ctx, js, "purged")
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
