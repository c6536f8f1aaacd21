package consumertest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumertest"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// signup is the code under test: it enqueues a welcome mail and, for a partner, a
// report job.
func signup(t *testing.T, p *producer.Producer, name string, partner bool) {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := p.EnqueueArgs(ctx, greet{Name: name}, producer.ID("welcome-"+name), producer.MaxAttempts(5)); err != nil {
		t.Fatal(err)
	}
	if partner {
		if _, err := p.Enqueue(ctx, []byte(name), producer.Kind("report"), producer.Header("Partner", "yes")); err != nil {
			t.Fatal(err)
		}
	}
}

func newQueue(t *testing.T, q string) (jetstream.JetStream, *producer.Producer) {
	t.Helper()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p, err := producer.New(testenv.Context(t, 10*time.Second), js, q)
	if err != nil {
		t.Fatal(err)
	}
	return js, p
}

func TestRequireEnqueued(t *testing.T) {
	t.Parallel()
	js, p := newQueue(t, "signups")
	signup(t, p, "ada", true)
	signup(t, p, "bob", false)

	g, j := consumertest.RequireEnqueuedArgs[greet](t, js, "signups", consumertest.Match{ID: "welcome-ada"})
	if g.Name != "ada" || j.Kind != "greet" || j.MaxAttempts != 5 || j.Sequence != 1 || j.EnqueuedAt.IsZero() {
		t.Fatalf("welcome-ada: %+v, %+v", g, j)
	}
	report := consumertest.RequireEnqueued(t, js, "signups", consumertest.Match{Kind: "report"})
	if string(report.Payload) != "ada" || report.Header.Get("Partner") != "yes" || report.Sequence != 2 {
		t.Fatalf("report: %+v", report)
	}
	consumertest.RequireNotEnqueued(t, js, "signups", consumertest.Match{Kind: "report", ID: "welcome-bob"})
	consumertest.RequireNotEnqueued(t, js, "signups", consumertest.Match{Kind: "invoice"})

	var ids []string
	for _, j := range consumertest.Enqueued(t, js, "signups") {
		ids = append(ids, j.ID)
	}
	if got := strings.Join(ids, " "); got != "welcome-ada "+report.ID+" welcome-bob" {
		t.Fatalf("Enqueued: %s", got)
	}
}

// Jobs that left the queue leave gaps in the stream; Enqueued reads past them, and
// finds a job published by any client, without workq's headers.
func TestEnqueuedSkipsFinishedJobs(t *testing.T) {
	t.Parallel()
	js, p := newQueue(t, "gaps")
	ctx := testenv.Context(t, 10*time.Second)
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, err := p.Enqueue(ctx, []byte(id), producer.ID(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, "workq.gaps.jobs", []byte("plain")); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "WORKQ_gaps")
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 3} { // as workers acking a and c would
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, j := range consumertest.Enqueued(t, js, "gaps") {
		got = append(got, j.ID+"="+string(j.Payload))
	}
	if s := strings.Join(got, " "); s != "b=b d=d seq-5=plain" {
		t.Fatalf("Enqueued: %s", s)
	}
}

func TestRequireEnqueuedFailsTheTest(t *testing.T) {
	t.Parallel()
	js, p := newQueue(t, "fails")
	signup(t, p, "ada", true)
	signup(t, p, "bob", true)
	for says, assert := range map[string]func(t testing.TB){
		`want one job matching kind "invoice", found 0; the queue holds 4 jobs: [id welcome-ada, kind "greet"]`: func(t testing.TB) {
			consumertest.RequireEnqueued(t, js, "fails", consumertest.Match{Kind: "invoice"})
		},
		`want one job matching kind "report", found 2`: func(t testing.TB) {
			consumertest.RequireEnqueued(t, js, "fails", consumertest.Match{Kind: "report"})
		},
		`want no job matching id welcome-bob, found 1 jobs: [id welcome-bob, kind "greet"]`: func(t testing.TB) {
			consumertest.RequireNotEnqueued(t, js, "fails", consumertest.Match{ID: "welcome-bob"})
		},
		"queue nope does not exist": func(t testing.TB) {
			consumertest.Enqueued(t, js, "nope")
		},
		`Match of kind "report" for consumertest_test.greet, whose kind is "greet"`: func(t testing.TB) {
			consumertest.RequireEnqueuedArgs[greet](t, js, "fails", consumertest.Match{Kind: "report"})
		},
	} {
		if failures := run(assert); len(failures) != 1 || !strings.Contains(failures[0], says) {
			t.Errorf("failures %q, want one saying %q", failures, says)
		}
	}
	// A payload that is not the type's JSON.
	if _, err := p.Enqueue(testenv.Context(t, 10*time.Second), []byte("{"), producer.ID("broken"), producer.Kind("greet")); err != nil {
		t.Fatal(err)
	}
	failures := run(func(t testing.TB) {
		consumertest.RequireEnqueuedArgs[greet](t, js, "fails", consumertest.Match{ID: "broken"})
	})
	if len(failures) != 1 || !strings.Contains(failures[0], `job broken: payload "{" is not a consumertest_test.greet`) {
		t.Errorf("failures %q", failures)
	}
}

// Jobs stored by group commit (atomic batches) carry the batch's transport headers
// in the stream; Enqueued shows the headers a handler sees, without them.
func TestEnqueuedHidesBatchHeaders(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p, err := producer.New(ctx, js, "batched", producer.GroupCommit(true))
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]producer.Job, 200)
	for i := range jobs {
		jobs[i] = producer.Job{Payload: []byte("x"), Header: nats.Header{"Team": []string{"a"}}}
	}
	if _, err := p.EnqueueBatch(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "WORKQ_batched")
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for seq := uint64(1); seq <= uint64(len(jobs)); seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("Nats-Batch-Id") != "" {
			stored++
		}
	}
	if stored == 0 {
		t.Fatal("no job was stored by an atomic batch: the test shows nothing")
	}
	for _, j := range consumertest.Enqueued(t, js, "batched") {
		for k := range j.Header {
			if strings.HasPrefix(k, "Nats-Batch-") {
				t.Fatalf("job %s: header %s, a transport header of the batch", j.ID, k)
			}
		}
		if j.Header.Get("Team") != "a" {
			t.Fatalf("job %s: headers %v, want the job's own", j.ID, j.Header)
		}
	}
}

// A delayed job is enqueued while it waits, with its due time and without the
// server's schedule headers; a periodic schedule is not a job.
func TestEnqueuedListsDelayedJobsNotSchedules(t *testing.T) {
	t.Parallel()
	js, p := newQueue(t, "later")
	ctx := testenv.Context(t, 10*time.Second)
	due := time.Now().Add(time.Hour)
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("remind"), producer.Kind("remind"), producer.At(due)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Schedule(ctx, "nightly", "0 2 * * *", []byte("n"), producer.Kind("report")); err != nil {
		t.Fatal(err)
	}
	jobs := consumertest.Enqueued(t, js, "later")
	if len(jobs) != 1 || jobs[0].ID != "remind" || jobs[0].Kind != "remind" || !jobs[0].ScheduledAt.Equal(due) {
		t.Fatalf("enqueued %+v; want the delayed job remind due %v only", jobs, due)
	}
	for k := range jobs[0].Header {
		if strings.HasPrefix(k, "Nats-Schedule") || strings.HasPrefix(k, "Nats-Expected") || k == "Nats-Rollup" {
			t.Errorf("header %s of the schedule is shown", k)
		}
	}
	consumertest.RequireNotEnqueued(t, js, "later", consumertest.Match{Kind: "report"})
}
