package bench_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/cmd/workq/internal/bench"
	"github.com/workq/workq/testenv"
)

// report runs one scenario per benchmark iteration batch and reports both rates and
// their ratio. b.N is the number of jobs (use -benchtime=20000x for a fixed count).
func report(b *testing.B, run func(ctx context.Context, n int) (bench.Pair, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := max(b.N, 2000)
	b.ResetTimer()
	p, err := run(ctx, n)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(p.Workq, "workq_jobs/s")
	b.ReportMetric(p.Raw, "raw_jobs/s")
	b.ReportMetric(p.Ratio(), "ratio")
	if p.RawSame > 0 {
		b.ReportMetric(p.RawSame, "rawsame_jobs/s")
		b.ReportMetric(p.Workq/p.RawSame, "ratio_same")
	}
	b.Log(p)
}

func BenchmarkEnqueueSingle(b *testing.B) {
	env := testenv.Start(b)
	e := bench.Env{JS: env.JetStream(b)}
	report(b, func(ctx context.Context, n int) (bench.Pair, error) { return bench.EnqueueSingle(ctx, e, n) })
}

func BenchmarkEnqueueBatch(b *testing.B) {
	env := testenv.Start(b)
	e := bench.Env{JS: env.JetStream(b)}
	report(b, func(ctx context.Context, n int) (bench.Pair, error) { return bench.EnqueueBatch(ctx, e, n) })
}

func BenchmarkProcessUnfenced(b *testing.B) { benchProcess(b, false) }

func BenchmarkProcessFenced(b *testing.B) { benchProcess(b, true) }

func benchProcess(b *testing.B, fenced bool) {
	for _, cfg := range []struct{ c, prefetch int }{{8, 0}, {32, 0}, {128, 0}, {32, 512}} {
		name := fmt.Sprintf("c=%d", cfg.c)
		if cfg.prefetch > 0 {
			name += fmt.Sprintf("/prefetch=%d", cfg.prefetch)
		}
		b.Run(name, func(b *testing.B) {
			env := testenv.Start(b)
			e := bench.Env{JS: env.JetStream(b)}
			report(b, func(ctx context.Context, n int) (bench.Pair, error) {
				return bench.Process(ctx, e, n, cfg.c, cfg.prefetch, fenced)
			})
		})
	}
}

// reportLatency runs a latency scenario once and reports both sides' percentiles.
func reportLatency(b *testing.B, run func(ctx context.Context) (bench.Latency, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.ResetTimer()
	l, err := run(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(l.Workq.P50), "workq_p50_ms")
	b.ReportMetric(ms(l.Workq.P99), "workq_p99_ms")
	b.ReportMetric(ms(l.Raw.P50), "raw_p50_ms")
	b.ReportMetric(ms(l.Raw.P99), "raw_p99_ms")
	b.ReportMetric(l.Ratio(), "ratio_p50")
	b.Log(l)
}

// b.N is the number of samples (use -benchtime=300x).
func BenchmarkEndToEnd(b *testing.B) {
	env := testenv.Start(b)
	e := bench.Env{JS: env.JetStream(b)}
	reportLatency(b, func(ctx context.Context) (bench.Latency, error) { return bench.EndToEnd(ctx, e, max(b.N, 50)) })
}

// b.N is the number of stalls (use -benchtime=5x); AckWait 1s.
func BenchmarkRedelivery(b *testing.B) {
	env := testenv.Start(b)
	e := bench.Env{JS: env.JetStream(b)}
	reportLatency(b, func(ctx context.Context) (bench.Latency, error) {
		return bench.Redelivery(ctx, e, min(b.N, 10), time.Second, false)
	})
}

func BenchmarkLockUncontended(b *testing.B) {
	env := testenv.Start(b)
	e := bench.Env{JS: env.JetStream(b)}
	reportLatency(b, func(ctx context.Context) (bench.Latency, error) { return bench.LockUncontended(ctx, e, max(b.N, 50)) })
}

// The raw side is the minimal protocol (a compare-and-set publish, then a purge
// marker), not the KV API.
func BenchmarkLockUncontendedMinimal(b *testing.B) {
	env := testenv.Start(b)
	e := bench.Env{JS: env.JetStream(b)}
	reportLatency(b, func(ctx context.Context) (bench.Latency, error) {
		return bench.LockUncontendedMinimal(ctx, e, max(b.N, 50))
	})
}

func BenchmarkLockHandoff(b *testing.B) {
	env := testenv.Start(b)
	e := bench.Env{JS: env.JetStream(b)}
	reportLatency(b, func(ctx context.Context) (bench.Latency, error) { return bench.LockHandoff(ctx, e, max(b.N, 64)) })
}

func BenchmarkLimiter(b *testing.B) {
	env := testenv.Start(b)
	e := bench.Env{JS: env.JetStream(b)}
	report(b, func(ctx context.Context, n int) (bench.Pair, error) { return bench.Limiter(ctx, e, n) })
}

// The worker runs in this process here, so no RSS figure: `workq bench --scenario
// backlog` runs it in a child process. b.N is the deep backlog (-benchtime=100000x).
func BenchmarkBacklog(b *testing.B) {
	env := testenv.Start(b)
	e := bench.Env{JS: env.JetStream(b)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r, err := bench.RunBacklog(ctx, e, bench.BacklogConfig{Base: 10000, N: max(b.N, 10000)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.WorkqRatio(), "workq_deep/base")
	b.ReportMetric(r.RawRatio(), "raw_deep/base")
	b.Log(r)
}

// The workflow fan-out/fan-in at concurrency 32: b.N is the tasks
// (-benchtime=10000x); the raw column is the same jobs without dependencies.
func BenchmarkWorkflowFanOut(b *testing.B) {
	env := testenv.Start(b)
	e := bench.Env{JS: env.JetStream(b)}
	report(b, func(ctx context.Context, n int) (bench.Pair, error) {
		f, err := bench.WorkflowFanOut(ctx, e, n, 32)
		b.Logf("enqueue %s (plain %s); %s", f.WorkflowEnqueue, f.PlainEnqueue, f.Phases)
		return f.Pair, err
	})
}

// A dependent's release after its parent's commit; b.N is the chain's links
// (-benchtime=300x); the raw column is a lone job's enqueue → start.
func BenchmarkWorkflowRelease(b *testing.B) {
	env := testenv.Start(b)
	e := bench.Env{JS: env.JetStream(b)}
	reportLatency(b, func(ctx context.Context) (bench.Latency, error) { return bench.WorkflowRelease(ctx, e, max(b.N, 50)) })
}

// testEnv starts a server for a test and returns the scenarios' Env on it and a
// context that ends after timeout (or with the test).
func testEnv(t *testing.T, timeout time.Duration) (bench.Env, context.Context) {
	t.Helper()
	return bench.Env{JS: testenv.Start(t).JetStream(t)}, testenv.Context(t, timeout)
}

// TestScenariosRun keeps the scenarios working under go test: small n, no timing claims.
func TestScenariosRun(t *testing.T) {
	t.Parallel()
	e, ctx := testEnv(t, time.Minute)
	for _, run := range []func() (bench.Pair, error){
		func() (bench.Pair, error) { return bench.EnqueueSingle(ctx, e, 200) },
		func() (bench.Pair, error) { return bench.EnqueueBatch(ctx, e, 500) },
		func() (bench.Pair, error) { return bench.Process(ctx, e, 500, 4, 0, false) },
		func() (bench.Pair, error) { return bench.Process(ctx, e, 500, 4, 0, true) },
		func() (bench.Pair, error) { return bench.Priorities(ctx, e, 400, 4) },
		func() (bench.Pair, error) { return bench.Limiter(ctx, e, 200) },
	} {
		p, err := run()
		if err != nil {
			t.Fatal(err)
		}
		if p.Workq <= 0 || p.Raw <= 0 {
			t.Fatalf("%s: no rate measured: %+v", p.Scenario, p)
		}
	}
	for _, run := range []func() (bench.Latency, error){
		func() (bench.Latency, error) { return bench.EndToEnd(ctx, e, 20) },
		func() (bench.Latency, error) { return bench.WaitLatency(ctx, e, 20) },
		func() (bench.Latency, error) { return bench.Redelivery(ctx, e, 1, 300*time.Millisecond, false) },
		func() (bench.Latency, error) { return bench.Redelivery(ctx, e, 1, 300*time.Millisecond, true) },
		func() (bench.Latency, error) { return bench.LockUncontended(ctx, e, 20) },
		func() (bench.Latency, error) { return bench.LockUncontendedMinimal(ctx, e, 20) },
		func() (bench.Latency, error) { return bench.LockHandoff(ctx, e, 16) },
	} {
		l, err := run()
		if err != nil {
			t.Fatal(err)
		}
		if l.Workq.P50 <= 0 || l.Raw.P50 <= 0 {
			t.Fatalf("%s: no latency measured: %+v", l.Scenario, l)
		}
	}
	r, err := bench.RunBacklog(ctx, e, bench.BacklogConfig{Base: 200, N: 500, Concurrency: 4, Prefetch: 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.WorkqBase.Rate <= 0 || r.WorkqN.Rate <= 0 || r.RawBase <= 0 || r.RawN <= 0 {
		t.Fatalf("backlog: no rate measured: %+v", r)
	}
}

// The scheduled-enqueue scenarios run and measure all three rates.
func TestScheduledEnqueueRuns(t *testing.T) {
	t.Parallel()
	e, ctx := testEnv(t, time.Minute)
	for _, run := range []func() (bench.ScheduledPair, error){
		func() (bench.ScheduledPair, error) { return bench.EnqueueScheduled(ctx, e, 500) },
		func() (bench.ScheduledPair, error) { return bench.EnqueueSingleScheduled(ctx, e, 100) },
	} {
		s, err := run()
		if err != nil {
			t.Fatal(err)
		}
		if s.Workq <= 0 || s.Raw <= 0 || s.Immediate <= 0 {
			t.Fatalf("%s: no rate measured: %+v", s.Scenario, s)
		}
		t.Logf("%s: delayed %.0f/s, raw schedules %.0f/s, immediate %.0f/s", s.Scenario, s.Workq, s.Raw, s.Immediate)
	}
}

// A burst's delayed jobs, as their handler saw them: every job due at the reported
// due time started exactly once, none before it, and the timings of every side are
// in order. With a lead shorter than the enqueue, the due time is moved out (the
// dropped attempt's jobs started early, by design, and are not counted).
func TestScheduledBurst(t *testing.T) {
	t.Parallel()
	e, ctx := testEnv(t, 2*time.Minute)
	const n = 300
	for _, lead := range []time.Duration{0, time.Millisecond} {
		var mu sync.Mutex
		type start struct{ at, due time.Time }
		starts := map[string][]start{}
		b, err := bench.ScheduledBurst(ctx, e, bench.BurstConfig{N: n, Concurrency: 8, Lead: lead,
			Started: func(id string, at, due time.Time) {
				mu.Lock()
				defer mu.Unlock()
				starts[id] = append(starts[id], start{at, due})
			}})
		if err != nil {
			t.Fatalf("lead %s: %v", lead, err)
		}
		t.Logf("lead %s → %s (moved %d), enqueue %s: due → first %s, all fired %s, all started %s, all done %s; raw (lead %s, moved %d) %+v; at once %+v (enqueue %s); waiting %+v; probe idle %s, firing %s",
			lead, b.Delayed.Lead, b.Delayed.Moved, b.Delayed.Enqueue, b.Delayed.First, b.Delayed.AllFired, b.Delayed.AllStarted, b.Delayed.AllDone,
			b.Raw.Lead, b.Raw.Moved, b.Raw.BurstTimes, b.AtOnce, b.AtOnceEnqueue, b.Waiting, b.Delayed.ProbeIdle, b.Delayed.ProbeFiring)
		mu.Lock()
		jobs := 0
		for id, ss := range starts {
			if !ss[0].due.Equal(b.Delayed.Due) {
				continue // a dropped attempt's job
			}
			jobs++
			if len(ss) != 1 {
				t.Errorf("job %s started %d times", id, len(ss))
			}
			if ss[0].at.Before(ss[0].due) {
				t.Errorf("job %s started %s before its due time", id, ss[0].due.Sub(ss[0].at))
			}
		}
		mu.Unlock()
		if jobs != n {
			t.Errorf("lead %s: %d jobs due at %s started, want %d", lead, jobs, b.Delayed.Due, n)
		}
		if lead > 0 && (b.Delayed.Moved == 0 || b.Raw.Moved == 0 || b.Delayed.Lead <= lead) {
			t.Errorf("lead %s, shorter than the enqueue: not moved out: %+v, raw %+v", lead, b.Delayed, b.Raw)
		}
		for _, side := range []struct {
			name string
			t    bench.BurstTimes
		}{{"delayed", b.Delayed.BurstTimes}, {"raw", b.Raw.BurstTimes}, {"at once", b.AtOnce}, {"waiting", b.Waiting}} {
			if side.t.First < 0 || side.t.AllStarted < side.t.First || side.t.AllDone < side.t.AllStarted {
				t.Errorf("%s: times out of order: %+v", side.name, side.t)
			}
		}
		for _, f := range []bench.Fired{b.Delayed, b.Raw} {
			if f.AllFired < 0 || f.AllFired > f.AllStarted {
				t.Errorf("the last job was fired %s after the due time, and all had started %s after it", f.AllFired, f.AllStarted)
			}
		}
		if b.Delayed.Enqueue <= 0 || b.Delayed.Lead-b.Delayed.Enqueue < 250*time.Millisecond || b.AtOnceEnqueue <= 0 {
			t.Errorf("enqueue %s with lead %s, at once %s: want the delayed enqueue done 250ms before the due time", b.Delayed.Enqueue, b.Delayed.Lead, b.AtOnceEnqueue)
		}
		if b.Delayed.ProbeIdle <= 0 || b.Delayed.ProbeFiring <= 0 || b.Raw.ProbeIdle <= 0 || b.Raw.ProbeFiring <= 0 {
			t.Errorf("probe: workq idle %s, firing %s; raw idle %s, firing %s: want all", b.Delayed.ProbeIdle, b.Delayed.ProbeFiring, b.Raw.ProbeIdle, b.Raw.ProbeFiring)
		}
	}
}

// The workflow scenario, run as `workq bench --scenario workflow` runs it, tiny: its
// rows come out with both columns, a ratio and their targets. The scenario itself
// fails when a task did not wait for its parents (it reads their records).
func TestWorkflowScenario(t *testing.T) {
	t.Parallel()
	e, ctx := testEnv(t, 2*time.Minute)
	srv := bench.External(ctx, e, "test", func() {})
	defer srv.Close()
	rep, err := bench.Run(ctx, srv, bench.Config{Scenarios: []string{"workflow"}, Runs: 1, Jobs: 200, Samples: 20, Concurrency: []int{4}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"workflow fan-out/fan-in of 200 vs plain jobs (workq, c=4): jobs/s":             "ratio ≥ 0.7",
		"workflow fan-out/fan-in of 200 vs plain jobs (workq, c=4): enqueue ms":         "",
		"workflow fan-out/fan-in of 200 vs plain jobs (workq, c=4): independent jobs/s": "",
		"workflow release vs lone job start (workq): p50 ms":                            "ratio ≤ 2",
		"workflow release vs lone job start (workq): p99 ms":                            "",
	}
	checkRows(t, rep, want)
}

// The sequence scenario, run as `workq bench --scenario sequence` runs it, tiny: its
// rows come out with both columns, a ratio and their targets. The scenario itself
// fails when a keyed job did not wait for the one before it (it reads their records),
// and the handoff when a job of its hot key did not wait at all.
func TestSequenceScenario(t *testing.T) {
	t.Parallel()
	e, ctx := testEnv(t, 2*time.Minute)
	srv := bench.External(ctx, e, "test", func() {})
	defer srv.Close()
	rep, err := bench.Run(ctx, srv, bench.Config{Scenarios: []string{"sequence"}, Runs: 1, Jobs: 200, Samples: 20, Concurrency: []int{4}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"sequence: 200 jobs over 20 keys vs plain jobs (workq, c=4): jobs/s":     "ratio ≥ 0.8",
		"sequence: 200 jobs over 20 keys vs plain jobs (workq, c=4): enqueue ms": "",
		"sequence handoff vs lone job start (workq): p50 ms":                     "ratio ≤ 2",
		"sequence handoff vs lone job start (workq): p99 ms":                     "",
	}
	checkRows(t, rep, want)
}

// checkRows checks that rep has the rows of want (scenario: metric → target) and no
// others, each with both columns, a ratio and its target, and notes where it has one.
func checkRows(t *testing.T, rep bench.Report, want map[string]string) {
	t.Helper()
	for _, r := range rep.Results {
		k := r.Scenario + ": " + r.Metric
		target, ok := want[k]
		if !ok {
			t.Errorf("unexpected row %s", k)
			continue
		}
		delete(want, k)
		if r.Workq <= 0 || r.Raw <= 0 || r.Ratio <= 0 || r.Target != target || (target != "") != (r.Met != nil) || len(r.Notes) == 0 && target != "" {
			t.Errorf("%s: %+v", k, r)
		}
		t.Logf("%s: workq %.2f, raw %.2f, ratio %.2f; %v", k, r.Workq, r.Raw, r.Ratio, r.Notes)
	}
	for k := range want {
		t.Errorf("no row %s", k)
	}
}
