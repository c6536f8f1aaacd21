package bench

import (
	"fmt"
	"slices"
	"time"
)

// pairRow is a throughput scenario's row, with its target (none: "") checked by check.
func pairRow(p Pair, target string, check func(Row) bool) Row {
	return Row{Scenario: p.Scenario, Metric: "jobs/s", Workq: p.Workq, Raw: p.Raw, Ratio: p.Ratio(), RawSame: p.RawSame, Target: target, check: check}
}

// ms is d in milliseconds, the report's unit of time.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ratio is workq's time over raw's; 0 when raw has none.
func ratio(w, r time.Duration) float64 {
	if r == 0 {
		return 0
	}
	return float64(w) / float64(r)
}

// scheduledRows are a scheduled-enqueue scenario's rows: delayed jobs against raw
// schedules, and against workq's jobs to run at once (in the raw column), with the
// group commit the immediate jobs had.
func scheduledRows(s ScheduledPair, env Env) []Row {
	gc := "group commit off (the default on one replica): delayed and immediate jobs are single publishes alike"
	switch {
	case env.GroupCommitOn() && env.GroupCommit == nil:
		gc = "group commit on (the default on a replicated queue): immediate jobs may share atomic batches, delayed ones never do"
	case env.GroupCommitOn():
		gc = "group commit on: immediate jobs may share atomic batches, delayed ones never do"
	case env.GroupCommit != nil:
		gc = "group commit off: delayed and immediate jobs are single publishes alike"
	}
	return []Row{
		pairRow(s.Pair, "", nil),
		{Scenario: s.Scenario + " vs at once (workq)", Metric: "jobs/s", Workq: s.Workq, Raw: s.Immediate, Ratio: s.ImmediateRatio(), Notes: []string{gc}},
	}
}

// burstRows are the schedule-burst scenario's rows. Its time figures are timed from
// the due time (workq's delayed jobs, raw's schedules), the enqueue's start (jobs
// enqueued at once to waiting workers) or the workers' start (jobs waiting); the
// "raw" column of the last two is workq itself.
func burstRows(b Burst) []Row {
	times := func(name string, w, r BurstTimes) []Row {
		return []Row{
			{Scenario: name, Metric: "first start ms", Workq: ms(w.First), Raw: ms(r.First), Ratio: ratio(w.First, r.First)},
			{Scenario: name, Metric: "all started ms", Workq: ms(w.AllStarted), Raw: ms(r.AllStarted), Ratio: ratio(w.AllStarted, r.AllStarted)},
			{Scenario: name, Metric: "all done ms", Workq: ms(w.AllDone), Raw: ms(r.AllDone), Ratio: ratio(w.AllDone, r.AllDone)},
		}
	}
	vsRaw := times(fmt.Sprintf("burst %d due at once (c=%d)", b.N, b.Concurrency), b.Delayed.BurstTimes, b.Raw.BurstTimes)
	vsRaw = slices.Insert(vsRaw, 1, Row{Scenario: vsRaw[0].Scenario, Metric: "all fired ms",
		Workq: ms(b.Delayed.AllFired), Raw: ms(b.Raw.AllFired), Ratio: ratio(b.Delayed.AllFired, b.Raw.AllFired)})
	vsRaw = append(vsRaw, Row{Scenario: vsRaw[0].Scenario, Metric: "enqueue beside it, max ms",
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

// latencyRows are a latency scenario's p50 and p99; p50Max, if not 0, is the p50's
// target.
func latencyRows(l Latency, p50Max time.Duration) []Row {
	p50 := Row{Scenario: l.Scenario, Metric: "p50 ms", Workq: ms(l.Workq.P50), Raw: ms(l.Raw.P50), Ratio: l.Ratio()}
	if p50Max > 0 {
		p50.Target = fmt.Sprintf("p50 ≤ %s", p50Max)
		p50.check = func(r Row) bool { return r.Workq <= ms(p50Max) }
	}
	p99 := Row{Scenario: l.Scenario, Metric: "p99 ms", Workq: ms(l.Workq.P99), Raw: ms(l.Raw.P99), Ratio: ratio(l.Workq.P99, l.Raw.P99)}
	return []Row{p50, p99}
}

// backlogRows are the backlog scenario's rows: both rates at both depths, each
// side's deep/base ratio, and the worker's peak RSS when it was measured.
func backlogRows(b Backlog) []Row {
	name := fmt.Sprintf("backlog %d vs %d", b.N, b.Base)
	mode := "unfenced"
	if b.Settings.Fenced {
		mode = "fenced"
	}
	name += fmt.Sprintf(" (%s c=%d prefetch=%d)", mode, b.Settings.Concurrency, b.Settings.Prefetch)
	rows := []Row{
		{Scenario: name, Metric: fmt.Sprintf("jobs/s @%d", b.Base), Workq: b.WorkqBase.Rate, Raw: b.RawBase, Ratio: b.WorkqBase.Rate / b.RawBase},
		{Scenario: name, Metric: fmt.Sprintf("jobs/s @%d", b.N), Workq: b.WorkqN.Rate, Raw: b.RawN, Ratio: b.WorkqN.Rate / b.RawN},
		// Here workq and raw are each one's own deep/base rate ratio (no workq/raw ratio).
		{Scenario: name, Metric: "rate deep/base", Workq: b.WorkqRatio(), Raw: b.RawRatio(), Target: "workq ≥ 0.8",
			check: func(r Row) bool { return r.Workq >= 0.8 }},
	}
	if b.WorkqN.MaxRSS > 0 {
		rows = append(rows,
			Row{Scenario: name, Metric: fmt.Sprintf("worker MiB @%d", b.Base), Workq: float64(b.WorkqBase.MaxRSS) / (1 << 20)},
			Row{Scenario: name, Metric: fmt.Sprintf("worker MiB @%d", b.N), Workq: float64(b.WorkqN.MaxRSS) / (1 << 20), Target: "peak RSS < 64 MiB",
				check: func(r Row) bool { return r.Workq < 64 }})
	}
	return rows
}

// fanOutRows are the workflow fan-out/fan-in rows: its rate against the same jobs
// without dependencies (target: ratio ≥ 0.7), and its enqueue against theirs, with
// when the workflow's phases ended in the notes.
func fanOutRows(f FanOut) []Row {
	rate := pairRow(f.Pair, "ratio ≥ 0.7", atLeast(0.7))
	rate.Notes = []string{"raw column: as many jobs without dependencies, enqueued with EnqueueBatch to a worker of the same settings; both timed from the enqueue's start to the last commit"}
	enqueue := Row{Scenario: f.Scenario, Metric: "enqueue ms", Workq: ms(f.WorkflowEnqueue), Raw: ms(f.PlainEnqueue), Ratio: ratio(f.WorkflowEnqueue, f.PlainEnqueue),
		Notes: []string{f.Phases.String()}}
	alone := Row{Scenario: f.Scenario, Metric: "independent jobs/s", Workq: f.Independent, Raw: f.Raw, Ratio: Pair{Workq: f.Independent, Raw: f.Raw}.Ratio(),
		Notes: []string{"independent: a workflow of as many tasks with no dependencies against the plain jobs, what a task's record costs before any release"}}
	return []Row{rate, enqueue, alone}
}

// releaseRows are the workflow release rows: a dependent's start after its parent's
// commit against a lone job's start after its enqueue (target: p50 ratio ≤ 2).
func releaseRows(l Latency) []Row {
	return againstLoneStart(l, fmt.Sprintf("workq column: a chain of %d tasks, a parent's commit (finished_at) → its dependent's start (started_at)", l.N+1))
}

// handoffRows are the sequence handoff rows: a hot key's job's start after the
// commit of the one before it against a lone job's start after its enqueue (target:
// p50 ratio ≤ 2).
func handoffRows(l Latency) []Row {
	return againstLoneStart(l, fmt.Sprintf("workq column: %d jobs on one key, all enqueued (one EnqueueBatch, in order) while the first was held, so that each waited for the one before it; "+
		"a job's commit (finished_at) → the next one's start (started_at)", l.N+1))
}

// againstLoneStart are the p50 and p99 rows of a start after another job's commit
// (what the workq column holds: workq), against a lone job's start after its
// enqueue, with the target p50 ratio ≤ 2.
func againstLoneStart(l Latency, workq string) []Row {
	rows := latencyRows(l, 0)
	rows[0].Target = "ratio ≤ 2"
	rows[0].check = func(r Row) bool { return r.Ratio <= 2 }
	rows[0].Notes = []string{workq + "; raw column: a lone job, producer.Enqueue called → its start (started_at), one at a time on the same queue and worker"}
	return rows
}

// drainRows are the sequence drain rows: the keyed jobs' rate against the same jobs
// without keys (target: ratio ≥ 0.8), and their enqueue against the plain one, with
// how many waited and when the last ran in the notes.
func drainRows(d KeyedDrain) []Row {
	rate := pairRow(d.Pair, "ratio ≥ 0.8", atLeast(0.8))
	rate.Notes = []string{fmt.Sprintf("workq column: %d keys of %.3g jobs each on average, each key's in order, enqueued by %d goroutines each an EnqueueBatch of its own keys' jobs "+
		"(a batch enqueues sequenced jobs one by one; goroutines over disjoint keys are their pipeline, as EnqueueBatch is the plain jobs'); "+
		"raw column: as many jobs without keys, one EnqueueBatch, to a worker of the same settings on a queue of its own; both timed from the enqueue's start to the last commit; "+
		"every keyed job's record checked: done, one attempt, started after the job before it in its key committed",
		d.Keys, float64(d.N)/float64(d.Keys), d.Enqueuers)}
	enqueue := Row{Scenario: d.Scenario, Metric: "enqueue ms", Workq: ms(d.SequenceEnqueue), Raw: ms(d.PlainEnqueue), Ratio: ratio(d.SequenceEnqueue, d.PlainEnqueue),
		Notes: []string{fmt.Sprintf("%d of %d keyed jobs waited for the one before them (their record's after), the others found it ended; the last keyed job started %s and committed %s after the enqueue's start",
			d.Waited, d.N, d.LastStarted.Round(time.Millisecond), d.LastDone.Round(time.Millisecond))}}
	return []Row{rate, enqueue}
}
