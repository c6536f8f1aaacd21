package main

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/cmd/workq/internal/bench"
)

// benchStep is one scenario (or one configuration of it) in a run.
type benchStep struct {
	name string
	run  func(ctx context.Context, st *status) ([]benchRow, error)
}

// The targets the project set for a 2-core machine, checked on the medians.
func atLeast(x float64) func(benchRow) bool { return func(r benchRow) bool { return r.Ratio >= x } }

func (a *app) benchSteps(f benchFlags, env bench.Env) []benchStep {
	var steps []benchStep
	for _, sc := range f.scenarios {
		switch sc {
		case "enqueue-single":
			steps = append(steps, benchStep{sc, func(ctx context.Context, _ *status) ([]benchRow, error) {
				p, err := bench.EnqueueSingle(ctx, env, f.jobs)
				return []benchRow{pairRow(p, "", nil)}, err
			}})
		case "enqueue-batch":
			steps = append(steps, benchStep{sc, func(ctx context.Context, _ *status) ([]benchRow, error) {
				p, err := bench.EnqueueBatch(ctx, env, f.jobs)
				if err == nil {
					p.RawSame, err = bench.EnqueueBatchSameShape(ctx, env, f.jobs)
				}
				return []benchRow{pairRow(p, "ratio ≥ 0.9", atLeast(0.9))}, err
			}})
		case "schedule-enqueue":
			steps = append(steps, benchStep{sc, func(ctx context.Context, _ *status) ([]benchRow, error) {
				p, immediate, err := bench.EnqueueScheduled(ctx, env, f.jobs)
				rows := []benchRow{pairRow(p, "", nil)}
				rows = append(rows, benchRow{Scenario: "enqueue batch scheduled vs at once (workq)", Metric: "jobs/s", Workq: p.Workq, Raw: immediate, Ratio: p.Workq / immediate})
				return rows, err
			}})
		case "schedule-burst":
			steps = append(steps, benchStep{sc, func(ctx context.Context, _ *status) ([]benchRow, error) {
				lead := f.burstLead
				if lead == 0 {
					lead = 3*time.Second + time.Duration(f.burst)*60*time.Microsecond
				}
				b, err := bench.ScheduledBurst(ctx, env, f.burst, f.burstC, lead)
				// Here "workq" is the jobs due at once, timed from their due time, and
				// "raw" the same jobs waiting in the queue, timed from the workers' start.
				name := fmt.Sprintf("burst %d due at once vs waiting (c=%d)", b.N, f.burstC)
				return []benchRow{
					{Scenario: name, Metric: "first start ms", Workq: ms(b.DueFirst), Raw: ms(b.ReadyFirst), Ratio: ratio(b.DueFirst, b.ReadyFirst)},
					{Scenario: name, Metric: "all started ms", Workq: ms(b.DueAll), Raw: ms(b.ReadyAll), Ratio: ratio(b.DueAll, b.ReadyAll)},
				}, err
			}})
		case "process-unfenced", "process-fenced":
			fenced := sc == "process-fenced"
			for _, c := range f.concurrency {
				for _, pre := range f.prefetch {
					name := fmt.Sprintf("%s c=%d", sc, c)
					if pre > 0 {
						name += fmt.Sprintf(" prefetch=%d", pre)
					}
					steps = append(steps, benchStep{name, func(ctx context.Context, _ *status) ([]benchRow, error) {
						p, err := bench.Process(ctx, env, f.jobs, c, pre, fenced)
						if fenced {
							return []benchRow{pairRow(p, "ratio ≥ 0.4", atLeast(0.4))}, err
						}
						return []benchRow{pairRow(p, "ratio ≥ 0.85", atLeast(0.85))}, err
					}})
				}
			}
		case "latency":
			steps = append(steps, benchStep{sc, func(ctx context.Context, _ *status) ([]benchRow, error) {
				l, err := bench.EndToEnd(ctx, env, f.samples)
				return latencyRows(l, nil), err
			}})
		case "redelivery":
			for _, crash := range []bool{false, true} {
				name := sc + " after stall"
				if crash {
					name = sc + " after crash"
				}
				steps = append(steps, benchStep{name, func(ctx context.Context, _ *status) ([]benchRow, error) {
					l, err := bench.Redelivery(ctx, env, f.redeliver, f.ackWait, crash)
					bound := f.ackWait + 250*time.Millisecond
					rows := latencyRows(l, nil)
					rows = append(rows, benchRow{Scenario: l.Scenario, Metric: "max ms", Workq: ms(l.Workq.Max), Raw: ms(l.Raw.Max), Ratio: ratio(l.Workq.Max, l.Raw.Max),
						Target: fmt.Sprintf("≤ AckWait + 250ms = %s", bound),
						check:  func(r benchRow) bool { return r.Workq <= ms(bound) }})
					return rows, err
				}})
			}
		case "lock":
			steps = append(steps, benchStep{sc + " uncontended", func(ctx context.Context, _ *status) ([]benchRow, error) {
				l, err := bench.LockUncontended(ctx, env, f.samples)
				return latencyRows(l, nil), err
			}}, benchStep{sc + " uncontended vs CAS", func(ctx context.Context, _ *status) ([]benchRow, error) {
				l, err := bench.LockUncontendedMinimal(ctx, env, f.samples)
				return latencyRows(l, nil), err
			}}, benchStep{sc + " handoff", func(ctx context.Context, _ *status) ([]benchRow, error) {
				l, err := bench.LockHandoff(ctx, env, f.samples)
				return latencyRows(l, func(r benchRow) bool { return r.Workq <= 5 }), err
			}})
		case "limiter":
			steps = append(steps, benchStep{sc, func(ctx context.Context, _ *status) ([]benchRow, error) {
				p, err := bench.Limiter(ctx, env, f.jobs)
				r := pairRow(p, "", nil)
				r.Metric = "ops/s"
				return []benchRow{r}, err
			}})
		case "backlog":
			steps = append(steps, benchStep{sc, func(ctx context.Context, st *status) ([]benchRow, error) {
				cfg := bench.BacklogConfig{Base: f.backlogBase, N: f.backlog, Concurrency: f.backlogC, Prefetch: f.backlogPre, Fenced: f.fenced}
				if !f.inProcess {
					cfg.Worker = a.childWorker(env.URL, bench.WorkerSettings{Concurrency: f.backlogC, Prefetch: f.backlogPre, Fenced: f.fenced, Replicas: f.replicas})
				}
				b, err := bench.RunBacklog(ctx, env, cfg, st.phase)
				return backlogRows(b), err
			}})
		}
	}
	return steps
}

func pairRow(p bench.Pair, target string, check func(benchRow) bool) benchRow {
	return benchRow{Scenario: p.Scenario, Metric: "jobs/s", Workq: p.Workq, Raw: p.Raw, Ratio: p.Ratio(), RawSame: p.RawSame, Target: target, check: check}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ratio(w, r time.Duration) float64 {
	if r == 0 {
		return 0
	}
	return float64(w) / float64(r)
}

// latencyRows are a latency scenario's p50 and p99; p50Check is the p50's target.
func latencyRows(l bench.Latency, p50Check func(benchRow) bool) []benchRow {
	p50 := benchRow{Scenario: l.Scenario, Metric: "p50 ms", Workq: ms(l.Workq.P50), Raw: ms(l.Raw.P50), Ratio: l.Ratio(), check: p50Check}
	if p50Check != nil {
		p50.Target = "p50 ≤ 5ms"
	}
	p99 := benchRow{Scenario: l.Scenario, Metric: "p99 ms", Workq: ms(l.Workq.P99), Raw: ms(l.Raw.P99), Ratio: ratio(l.Workq.P99, l.Raw.P99)}
	return []benchRow{p50, p99}
}

func backlogRows(b bench.Backlog) []benchRow {
	name := fmt.Sprintf("backlog %d vs %d", b.N, b.Base)
	mode := "unfenced"
	if b.Settings.Fenced {
		mode = "fenced"
	}
	name += fmt.Sprintf(" (%s c=%d prefetch=%d)", mode, b.Settings.Concurrency, b.Settings.Prefetch)
	rows := []benchRow{
		{Scenario: name, Metric: fmt.Sprintf("jobs/s @%d", b.Base), Workq: b.WorkqBase.Rate, Raw: b.RawBase, Ratio: b.WorkqBase.Rate / b.RawBase},
		{Scenario: name, Metric: fmt.Sprintf("jobs/s @%d", b.N), Workq: b.WorkqN.Rate, Raw: b.RawN, Ratio: b.WorkqN.Rate / b.RawN},
		// Here workq and raw are each one's own deep/base rate ratio (no workq/raw ratio).
		{Scenario: name, Metric: "rate deep/base", Workq: b.WorkqRatio(), Raw: b.RawRatio(), Target: "workq ≥ 0.8",
			check: func(r benchRow) bool { return r.Workq >= 0.8 }},
	}
	if b.WorkqN.MaxRSS > 0 {
		rows = append(rows,
			benchRow{Scenario: name, Metric: fmt.Sprintf("worker MiB @%d", b.Base), Workq: float64(b.WorkqBase.MaxRSS) / (1 << 20)},
			benchRow{Scenario: name, Metric: fmt.Sprintf("worker MiB @%d", b.N), Workq: float64(b.WorkqN.MaxRSS) / (1 << 20), Target: "peak RSS < 64 MiB",
				check: func(r benchRow) bool { return r.Workq < 64 }})
	}
	return rows
}
