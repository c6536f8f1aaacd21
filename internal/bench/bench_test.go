package bench_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workq/workq/internal/bench"
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
	js := env.JetStream(b)
	report(b, func(ctx context.Context, n int) (bench.Pair, error) { return bench.EnqueueSingle(ctx, js, n) })
}

func BenchmarkEnqueueBatch(b *testing.B) {
	env := testenv.Start(b)
	js := env.JetStream(b)
	report(b, func(ctx context.Context, n int) (bench.Pair, error) { return bench.EnqueueBatch(ctx, js, n) })
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
			js := env.JetStream(b)
			report(b, func(ctx context.Context, n int) (bench.Pair, error) {
				return bench.Process(ctx, js, n, cfg.c, cfg.prefetch, fenced)
			})
		})
	}
}

// TestScenariosRun keeps the scenarios working under go test: small n, no timing claims.
func TestScenariosRun(t *testing.T) {
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, run := range []func() (bench.Pair, error){
		func() (bench.Pair, error) { return bench.EnqueueSingle(ctx, js, 200) },
		func() (bench.Pair, error) { return bench.EnqueueBatch(ctx, js, 500) },
		func() (bench.Pair, error) { return bench.Process(ctx, js, 500, 4, 0, false) },
		func() (bench.Pair, error) { return bench.Process(ctx, js, 500, 4, 0, true) },
	} {
		p, err := run()
		if err != nil {
			t.Fatal(err)
		}
		if p.Workq <= 0 || p.Raw <= 0 {
			t.Fatalf("%s: no rate measured: %+v", p.Scenario, p)
		}
	}
}
