package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq/cmd/workq/internal/bench"
	"github.com/workq/workq/testenv"
)

// BenchmarkEnqueueUnique: single enqueues with a new unique key each, beside plain
// enqueues, duplicates of a held key, raw publishes and the raw create+publish a
// unique enqueue amounts to. b.N is the number of jobs each way.
func BenchmarkEnqueueUnique(b *testing.B) {
	env := testenv.Start(b)
	e := bench.Env{JS: env.JetStream(b)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := max(b.N, 2000)
	b.ResetTimer()
	u, err := bench.EnqueueUniqueSingle(ctx, e, n)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(u.Unique, "unique_jobs/s")
	b.ReportMetric(u.Plain, "plain_jobs/s")
	b.ReportMetric(u.Duplicate, "duplicate_jobs/s")
	b.ReportMetric(u.Raw, "raw_jobs/s")
	b.ReportMetric(u.Unique/u.Plain, "unique/plain")
	b.ReportMetric(u.Unique/u.RawSame, "unique/rawsame")
	b.Log(u)
}
