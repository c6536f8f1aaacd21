package bench_test

import (
	"context"
	"fmt"
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

// TestScenariosRun keeps the scenarios working under go test: small n, no timing claims.
func TestScenariosRun(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	e := bench.Env{JS: env.JetStream(t)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, run := range []func() (bench.Pair, error){
		func() (bench.Pair, error) { return bench.EnqueueSingle(ctx, e, 200) },
		func() (bench.Pair, error) { return bench.EnqueueBatch(ctx, e, 500) },
		func() (bench.Pair, error) { return bench.Process(ctx, e, 500, 4, 0, false) },
		func() (bench.Pair, error) { return bench.Process(ctx, e, 500, 4, 0, true) },
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

// The scheduling scenarios run, and the burst's delayed jobs each start once, none
// before its time (ScheduledBurst fails a run with an early start).
func TestScheduleScenariosRun(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	e := bench.Env{JS: env.JetStream(t)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, immediate, err := bench.EnqueueScheduled(ctx, e, 500)
	if err != nil {
		t.Fatal(err)
	}
	if p.Workq <= 0 || p.Raw <= 0 || immediate <= 0 {
		t.Fatalf("no rate measured: %+v, immediate %v", p, immediate)
	}
	b, err := bench.ScheduledBurst(ctx, e, 300, 8, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if b.Early != 0 || b.DueFirst < 0 || b.DueAll < b.DueFirst || b.ReadyAll < b.ReadyFirst || b.ReadyFirst < 0 {
		t.Fatalf("burst %+v", b)
	}
	t.Logf("burst of 300: due → first %v, all %v; waiting → first %v, all %v", b.DueFirst, b.DueAll, b.ReadyFirst, b.ReadyAll)
	if _, err := bench.ScheduledBurst(ctx, e, 300, 8, time.Millisecond); err == nil {
		t.Error("a lead time shorter than the enqueue was not refused")
	}
}
