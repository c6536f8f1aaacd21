package producer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Jobs lists every job of a queue in every state — records, delayed jobs waiting,
// jobs no worker has received — newest first, filtered by state and kind, and paging
// with the cursor visits each job once.
func TestJobsListsByStateAndPages(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 60*time.Second)
	const q = "listed"
	p := mustNew(t, js, q)

	// 12 jobs that a worker runs: every third one dies, the rest are done.
	for i := range 12 {
		kind := "even"
		if i%2 == 1 {
			kind = "odd"
		}
		if _, err := p.Enqueue(ctx, []byte("x"), producer.ID(fmt.Sprintf("run-%02d", i)), producer.Kind(kind)); err != nil {
			t.Fatal(err)
		}
	}
	var finished atomic.Int32
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		defer finished.Add(1)
		var n int
		fmt.Sscanf(j.ID(), "run-%d", &n)
		if n%3 == 0 {
			return consumer.Permanent(errors.New("no"))
		}
		return nil
	}), consumer.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = w.Run(wctx); close(stopped) }()
	testenv.Eventually(t, 20*time.Second, "12 jobs finished", func() bool { return finished.Load() == 12 })
	testenv.Eventually(t, 20*time.Second, "12 records written", func() bool {
		page, err := p.Jobs(ctx, producer.JobQuery{})
		return err == nil && len(page.Jobs) == 12
	})
	stop()
	<-stopped

	// With no worker running: 5 queued, 3 delayed, 1 cancelled.
	for i := range 5 {
		if _, err := p.Enqueue(ctx, []byte("x"), producer.ID(fmt.Sprintf("wait-%d", i)), producer.Kind("odd")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := p.Enqueue(ctx, []byte("x"), producer.ID(fmt.Sprintf("later-%d", i)), producer.After(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("nope")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Cancel(ctx, "nope"); err != nil {
		t.Fatal(err)
	}

	ids := func(q producer.JobQuery) []string {
		t.Helper()
		page, err := p.Jobs(ctx, q)
		if err != nil {
			t.Fatalf("Jobs(%+v): %v", q, err)
		}
		var out []string
		for _, j := range page.Jobs {
			if (q.State != "" && j.State != q.State) || (q.Kind != "" && j.Kind != q.Kind) {
				t.Errorf("Jobs(%+v) listed %s (%s, %s)", q, j.ID, j.State, j.Kind)
			}
			out = append(out, j.ID)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		q    producer.JobQuery
		want string
	}{
		{producer.JobQuery{State: producer.StateDead}, "run-00 run-03 run-06 run-09"},
		{producer.JobQuery{State: producer.StateDone, Kind: "odd"}, "run-01 run-05 run-07 run-11"},
		{producer.JobQuery{State: producer.StateQueued}, "wait-0 wait-1 wait-2 wait-3 wait-4"},
		{producer.JobQuery{State: producer.StateScheduled}, "later-0 later-1 later-2"},
		{producer.JobQuery{State: producer.StateCancelled}, "nope"},
		{producer.JobQuery{State: producer.StateRunning}, ""},
	} {
		if got := strings.Join(ids(c.q), " "); got != c.want {
			t.Errorf("Jobs(%+v) = %s; want %s", c.q, got, c.want)
		}
	}

	// Every job, 4 to a page: each once, newest first across the pages.
	var all []producer.ListedJob
	query := producer.JobQuery{Limit: 4}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("more than 10 pages of 4 for 21 jobs")
		}
		page, err := p.Jobs(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Jobs) > 4 || page.Next != "" && len(page.Jobs) != 4 {
			t.Fatalf("page of %d jobs, next %q", len(page.Jobs), page.Next)
		}
		all = append(all, page.Jobs...)
		if page.Next == "" {
			break
		}
		query.Cursor = page.Next
	}
	seen := map[string]bool{}
	for i, j := range all {
		if seen[j.ID] {
			t.Errorf("%s listed twice", j.ID)
		}
		seen[j.ID] = true
		if i > 0 && j.Updated.After(all[i-1].Updated) {
			t.Errorf("%s (%s) listed after the older %s (%s)", j.ID, j.Updated, all[i-1].ID, all[i-1].Updated)
		}
	}
	if len(seen) != 21 {
		t.Errorf("%d jobs listed across the pages, want 21 (12 run, 5 queued, 3 delayed, 1 cancelled)", len(seen))
	}
	// The newest: the cancelled job's record, written last.
	if len(all) > 0 && all[0].ID != "nope" {
		t.Errorf("newest listed %s, want nope", all[0].ID)
	}

	if _, err := p.Jobs(ctx, producer.JobQuery{State: "sleeping"}); !errors.Is(err, producer.ErrInvalidOption) {
		t.Errorf("unknown state: %v", err)
	}
	if _, err := p.Jobs(ctx, producer.JobQuery{Cursor: "garbage!"}); !errors.Is(err, producer.ErrInvalidOption) {
		t.Errorf("bad cursor: %v", err)
	}
}

// BenchmarkJobs lists pages of 50 among many job records (WORKQ_BENCH_RECORDS, default
// 100 000; 1 000 000 for BENCHMARKS.md): the newest, a rare state (dead, 1 in 1000), a
// rare kind (1 in 1000). "cold" is a producer's first page, which reads every record;
// the others come from its index, "after-writes" with 1000 records written since the
// page before:
//
//	WORKQ_BENCH_RECORDS=1000000 go test -run x -bench Jobs -benchtime 5x ./producer/
func BenchmarkJobs(b *testing.B) {
	n := 100_000
	if v := os.Getenv("WORKQ_BENCH_RECORDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("WORKQ_BENCH_RECORDS=%q: want a number ≥ 1000", v)
		}
	}
	env := testenv.Start(b)
	js := env.JetStream(b)
	ctx := testenv.Context(b, 30*time.Minute)
	p, err := producer.New(ctx, js, "big")
	if err != nil {
		b.Fatal(err)
	}
	write := func(i int, state string) {
		kind := "k"
		if i%1000 == 7 {
			kind = "rare"
		}
		rec := fmt.Sprintf(`{"id":"job-%07d","queue":"big","kind":%q,"state":%q,"attempt":1,"sequence":%d,"worker":{"name":"w","host":"h","pid":1},"enqueued_at":"2026-11-24T00:00:00Z","started_at":"2026-11-24T00:00:01Z","finished_at":"2026-11-24T00:00:02Z"}`, i, kind, state, i+1)
		if _, err := js.PublishAsync(fmt.Sprintf("$KV.WORKQ_big_JOBS.job-%07d", i), []byte(rec)); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		state := "done"
		if i%1000 == 0 {
			state = "dead"
		}
		write(i, state)
	}
	stored := func() {
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			b.Fatal("records not stored")
		}
	}
	stored()
	page := func(p *producer.Producer, q producer.JobQuery) {
		q.Limit = 50
		page, err := p.Jobs(ctx, q)
		if err != nil || len(page.Jobs) != 50 {
			b.Fatalf("%d jobs, %v", len(page.Jobs), err)
		}
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			fresh, err := producer.New(ctx, js, "big")
			if err != nil {
				b.Fatal(err)
			}
			page(fresh, producer.JobQuery{})
		}
	})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	page(p, producer.JobQuery{}) // builds p's index
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.Logf("the index of %d records holds %d bytes of heap, %.0f a record", n, after.HeapAlloc-before.HeapAlloc, float64(after.HeapAlloc-before.HeapAlloc)/float64(n))
	for _, c := range []struct {
		name string
		q    producer.JobQuery
	}{{"newest", producer.JobQuery{}}, {"dead", producer.JobQuery{State: producer.StateDead}}, {"kind", producer.JobQuery{Kind: "rare"}}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				page(p, c.q)
			}
		})
	}
	next := n
	b.Run("after-writes", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			for range 1000 {
				write(next%n, "done") // a job written again: its record moves to the newest end
				next++
			}
			stored()
			b.StartTimer()
			page(p, producer.JobQuery{State: producer.StateDead})
		}
	})
}
