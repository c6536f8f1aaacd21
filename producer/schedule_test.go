package producer_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Every kind of spec workq accepts is accepted by the server too.
func TestScheduleSpecsTheServerTakes(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p := mustNew(t, js, "specs")
	for i, spec := range []string{"@every 1s", "@every 90m", "0 2 * * *", "*/15 9-17 * * mon-fri", "0 0 1,15 jan,jul ?",
		"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "TZ=Europe/Berlin 0 2 * * *",
		"CRON_TZ=America/New_York 30 8 * * 1-5", "TZ=Asia/Kolkata @daily"} {
		s, err := p.Schedule(ctx, fmt.Sprint("s", i), spec, nil)
		if err != nil {
			t.Errorf("Schedule(%q): %v", spec, err)
			continue
		}
		if s.Spec != spec || s.Paused || !s.Next.After(time.Now()) {
			t.Errorf("Schedule(%q) = %+v", spec, s)
		}
	}
	list, err := p.Schedules(ctx)
	if err != nil || len(list) != 14 {
		t.Fatalf("Schedules = %d, %v", len(list), err)
	}
	for _, bad := range []string{"@every 100ms", "TZ=Mars/Olympus 0 2 * * *", "0 2 * * * *", "nonsense"} {
		if _, err := p.Schedule(ctx, "bad", bad, nil); !errors.Is(err, producer.ErrInvalidSchedule) {
			t.Errorf("Schedule(%q) = %v, want ErrInvalidSchedule", bad, err)
		}
	}
	if _, err := p.Schedule(ctx, "bad name!", "@daily", nil); !errors.Is(err, producer.ErrInvalidName) {
		t.Errorf("bad name: %v", err)
	}
	if _, err := p.Schedule(ctx, "with-id", "@daily", nil, producer.ID("x")); !errors.Is(err, producer.ErrInvalidOption) {
		t.Errorf("ID option: %v", err)
	}
}

// Adding a schedule as it is writes nothing; with another definition it is
// updated, keeping its paused state; pause, resume and remove act and say so.
func TestScheduleUpdatePauseRemove(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p := mustNew(t, js, "sched-crud")
	first, err := p.Schedule(ctx, "nightly", "0 2 * * *", []byte("a"), producer.Kind("report"), producer.Header("Team", "x"))
	if err != nil {
		t.Fatal(err)
	}
	same, err := p.Schedule(ctx, "nightly", "0 2 * * *", []byte("a"), producer.Kind("report"), producer.Header("Team", "x"))
	if err != nil || same.Sequence != first.Sequence {
		t.Fatalf("adding it again: %+v, %v; want sequence %d unchanged", same, err, first.Sequence)
	}
	paused, err := p.PauseSchedule(ctx, "nightly")
	if err != nil || !paused.Paused || !paused.Next.IsZero() || paused.Kind != "report" || paused.Header.Get("Team") != "x" {
		t.Fatalf("paused: %+v, %v", paused, err)
	}
	changed, err := p.Schedule(ctx, "nightly", "0 3 * * *", []byte("b"), producer.Kind("report"))
	if err != nil || changed.Spec != "0 3 * * *" || !changed.Paused || string(changed.Payload) != "b" || changed.Header.Get("Team") != "" {
		t.Fatalf("changed while paused: %+v, %v", changed, err)
	}
	resumed, err := p.ResumeSchedule(ctx, "nightly")
	if err != nil || resumed.Paused || resumed.Next.UTC().Hour() != 3 || resumed.Next.Minute() != 0 {
		t.Fatalf("resumed: %+v, %v", resumed, err)
	}
	got, err := p.GetSchedule(ctx, "nightly")
	if err != nil || got.Sequence != resumed.Sequence {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if err := p.RemoveSchedule(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.GetSchedule(ctx, "nightly"); !errors.Is(err, producer.ErrScheduleNotFound) {
		t.Errorf("get after remove: %v", err)
	}
	for name, err := range map[string]error{
		"remove": p.RemoveSchedule(ctx, "nightly"),
		"pause":  second(p.PauseSchedule(ctx, "nightly")),
		"resume": second(p.ResumeSchedule(ctx, "nightly")),
	} {
		if !errors.Is(err, producer.ErrScheduleNotFound) {
			t.Errorf("%s of a removed schedule: %v", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// Cancel: a scheduled job is cancelled (again: the same record), a queued one or an
// unknown one is not.
func TestCancel(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p := mustNew(t, js, "cancel")
	due := time.Now().Add(time.Hour)
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("later"), producer.At(due), producer.Kind("k")); err != nil {
		t.Fatal(err)
	}
	rec, err := p.Cancel(ctx, "later")
	if err != nil || rec.State != producer.StateCancelled || !rec.ScheduledAt.Equal(due) || rec.Kind != "k" {
		t.Fatalf("Cancel = %+v, %v", rec, err)
	}
	if st, err := p.Status(ctx, "later"); err != nil || st.State != producer.StateCancelled {
		t.Fatalf("Status after cancel = %+v, %v", st, err)
	}
	if again, err := p.Cancel(ctx, "later"); err != nil || again.State != producer.StateCancelled {
		t.Fatalf("second Cancel = %+v, %v", again, err)
	}
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("now")); err != nil {
		t.Fatal(err)
	}
	if rec, err := p.Cancel(ctx, "now"); err != nil || rec.State != producer.StateCancelled {
		t.Errorf("Cancel of a queued job: %+v, %v", rec, err)
	}
	if _, err := p.Cancel(ctx, "nobody"); !errors.Is(err, producer.ErrNotFound) {
		t.Errorf("Cancel of an unknown job: %v", err)
	}
	// The id can be scheduled again once the dedup window has passed (here: another id
	// shows the schedule subject is free); the cancelled schedule is gone from the stream.
	info, err := p.Enqueue(ctx, []byte("x"), producer.ID("later-2"), producer.At(due))
	if err != nil || info.Duplicate {
		t.Fatalf("%+v, %v", info, err)
	}
}

// Delayed jobs in a batch, beside immediate ones: each is scheduled or queued as
// asked, a second schedule of an id in a batch is a duplicate, and an id scheduled
// is a duplicate for an enqueue at once within the dedup window.
func TestBatchWithDelayedJobs(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p := mustNew(t, js, "batch-at", producer.GroupCommit(true))
	due := time.Now().Add(time.Hour)
	res, err := p.EnqueueBatch(ctx, []producer.Job{
		{ID: "a", At: due}, {ID: "b"}, {ID: "c", At: time.Now().Add(-time.Minute)}, {ID: "d", At: due},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, false, true} {
		if got := !res[i].ScheduledAt.IsZero(); got != want || res[i].Duplicate {
			t.Errorf("job %s: %+v; scheduled %v", res[i].ID, res[i], want)
		}
	}
	for id, want := range map[string]producer.State{"a": producer.StateScheduled, "b": producer.StateQueued, "c": producer.StateQueued, "d": producer.StateScheduled} {
		if st, err := p.Status(ctx, id); err != nil || st.State != want {
			t.Errorf("%s: %+v, %v; want %s", id, st, err, want)
		}
	}
	res, err = p.EnqueueBatch(ctx, []producer.Job{{ID: "a", At: due.Add(time.Hour)}, {ID: "d"}})
	if err != nil || !res[0].Duplicate || res[0].Sequence != 1 || !res[1].Duplicate {
		t.Fatalf("again: %+v, %v; want both duplicates, a of sequence 1", res, err)
	}
}

// A scheduled id stays reserved after the dedup window: a second schedule of it is
// a duplicate as long as the first waits.
func TestScheduledIDReservedPastTheDedupWindow(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p := mustNew(t, js, "reserved", producer.DuplicateWindow(time.Second))
	first, err := p.Enqueue(ctx, []byte("x"), producer.ID("later"), producer.After(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past the dedup window
	again, err := p.Enqueue(ctx, []byte("x"), producer.ID("later"), producer.After(2*time.Hour))
	if err != nil || !again.Duplicate || again.Sequence != first.Sequence {
		t.Fatalf("second schedule = %+v, %v; want a duplicate of %d", again, err, first.Sequence)
	}
	res, err := p.EnqueueBatch(ctx, []producer.Job{{ID: "later", At: time.Now().Add(time.Hour)}})
	if err != nil || !res[0].Duplicate || res[0].Sequence != first.Sequence {
		t.Fatalf("in a batch = %+v, %v", res, err)
	}
}
