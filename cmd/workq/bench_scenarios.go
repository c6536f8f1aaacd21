package main

import (
	"context"
	"fmt"
	"slices"
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
			steps = append(steps, benchStep{sc + " batch", func(ctx context.Context, _ *status) ([]benchRow, error) {
				s, err := bench.EnqueueScheduled(ctx, env, f.jobs)
				return scheduledRows(s, env), err
			}}, benchStep{sc + " single", func(ctx context.Context, _ *status) ([]benchRow, error) {
				s, err := bench.EnqueueSingleScheduled(ctx, env, f.jobs)
				return scheduledRows(s, env), err
			}})
		case "schedule-burst":
			steps = append(steps, benchStep{sc, func(ctx context.Context, _ *status) ([]benchRow, error) {
				b, err := bench.ScheduledBurst(ctx, env, bench.BurstConfig{N: f.burst, Concurrency: f.burstC, Lead: f.burstLead})
				return burstRows(b), err
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
						if env.JobTime > 0 {
							return []benchRow{pairRow(p, "", nil)}, err // the raw side is empty: no ratio to hold
						}
						if fenced {
							return []benchRow{pairRow(p, "ratio ≥ 0.4", atLeast(0.4))}, err
						}
						return []benchRow{pairRow(p, "ratio ≥ 0.85", atLeast(0.85))}, err
					}})
				}
			}
		case "process-priority":
			for _, c := range f.concurrency {
				steps = append(steps, benchStep{fmt.Sprintf("%s c=%d", sc, c), func(ctx context.Context, _ *status) ([]benchRow, error) {
					p, err := bench.Priorities(ctx, env, f.jobs, c)
					row := pairRow(p, "", nil)
					row.Notes = []string{"raw column: the same workq worker on the same number of jobs, all of the normal level"}
					return []benchRow{row}, err
				}})
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

// scheduledRows are a scheduled-enqueue scenario's rows: delayed jobs against raw
// schedules, and against workq's jobs to run at once (in the raw column), with the
// group commit the immediate jobs had.
func scheduledRows(s bench.ScheduledPair, env bench.Env) []benchRow {
	gc := "group commit off (the default on one replica): delayed and immediate jobs are single publishes alike"
	switch {
	case env.GroupCommitOn() && env.GroupCommit == nil:
		gc = "group commit on (the default on a replicated queue): immediate jobs may share atomic batches, delayed ones never do"
	case env.GroupCommitOn():
		gc = "group commit on: immediate jobs may share atomic batches, delayed ones never do"
	case env.GroupCommit != nil:
		gc = "group commit off: delayed and immediate jobs are single publishes alike"
	}
	return []benchRow{
		pairRow(s.Pair, "", nil),
		{Scenario: s.Scenario + " vs at once (workq)", Metric: "jobs/s", Workq: s.Workq, Raw: s.Immediate, Ratio: s.ImmediateRatio(), Notes: []string{gc}},
	}
}

// burstRows are the schedule-burst scenario's rows. Its time figures are timed from
// the due time (workq's delayed jobs, raw's schedules), the enqueue's start (jobs
// enqueued at once to waiting workers) or the workers' start (jobs waiting); the
// "raw" column of the last two is workq itself.
func burstRows(b bench.Burst) []benchRow {
	times := func(name string, w, r bench.BurstTimes) []benchRow {
		return []benchRow{
			{Scenario: name, Metric: "first start ms", Workq: ms(w.First), Raw: ms(r.First), Ratio: ratio(w.First, r.First)},
			{Scenario: name, Metric: "all started ms", Workq: ms(w.AllStarted), Raw: ms(r.AllStarted), Ratio: ratio(w.AllStarted, r.AllStarted)},
			{Scenario: name, Metric: "all done ms", Workq: ms(w.AllDone), Raw: ms(r.AllDone), Ratio: ratio(w.AllDone, r.AllDone)},
		}
	}
	vsRaw := times(fmt.Sprintf("burst %d due at once (c=%d)", b.N, b.Concurrency), b.Delayed.BurstTimes, b.Raw.BurstTimes)
	vsRaw = slices.Insert(vsRaw, 1, benchRow{Scenario: vsRaw[0].Scenario, Metric: "all fired ms",
		Workq: ms(b.Delayed.AllFired), Raw: ms(b.Raw.AllFired), Ratio: ratio(b.Delayed.AllFired, b.Raw.AllFired)})
	vsRaw = append(vsRaw, benchRow{Scenario: vsRaw[0].Scenario, Metric: "enqueue beside it, max ms",
		Workq: ms(b.Delayed.ProbeFiring), Raw: ms(b.Raw.ProbeFiring), Ratio: ratio(b.Delayed.ProbeFiring, b.Raw.ProbeFiring)})
	vsRaw[0].Notes = []string{fmt.Sprintf("timed from the due time; due %s after the enqueue's start (moved out %d times), which took %s (raw: due %s after, moved %d times, took %s); "+
		"a single enqueue beside the burst, one every 10 ms, took at most %s before the due time (raw %s)",
		b.Delayed.Lead.Round(time.Millisecond), b.Delayed.Moved, b.Delayed.Enqueue.Round(time.Millisecond),
		b.Raw.Lead.Round(time.Millisecond), b.Raw.Moved, b.Raw.Enqueue.Round(time.Millisecond),
		b.Delayed.ProbeIdle.Round(10*time.Microsecond), b.Raw.ProbeIdle.Round(10*time.Microsecond))}
	atOnce := times(fmt.Sprintf("burst %d due at once vs enqueued at once (workq, c=%d)", b.N, b.Concurrency), b.Delayed.BurstTimes, b.AtOnce)
	atOnce[0].Notes = []string{fmt.Sprintf("raw column: workq's jobs enqueued to run at once into an idle queue, workers waiting, timed from the enqueue's start; "+
		"the enqueue took %s, so all had started %s after the last was in the stream",
		b.AtOnceEnqueue.Round(time.Millisecond), (b.AtOnce.AllStarted - b.AtOnceEnqueue).Round(time.Millisecond))}
	waiting := times(fmt.Sprintf("burst %d due at once vs waiting (workq, c=%d)", b.N, b.Concurrency), b.Delayed.BurstTimes, b.Waiting)
	waiting[0].Notes = []string{"raw column: workq's jobs all waiting in the queue when the workers start, timed from their start"}
	return slices.Concat(vsRaw, atOnce, waiting)
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
