package bench

import (
	"context"
	"fmt"
	"time"
)

// step is one scenario (or one configuration of it) in a run.
type step struct {
	name string
	run  func(ctx context.Context, st *status) ([]Row, error)
}

// The targets the project set for a 2-core machine, checked on the medians.
func atLeast(x float64) func(Row) bool { return func(r Row) bool { return r.Ratio >= x } }

// plan is the steps of one run of cfg's scenarios against env, in order.
func plan(cfg Config, env Env) []step {
	var steps []step
	for _, sc := range cfg.Scenarios {
		switch sc {
		case "enqueue-single":
			steps = append(steps, step{sc, func(ctx context.Context, _ *status) ([]Row, error) {
				p, err := EnqueueSingle(ctx, env, cfg.Jobs)
				return []Row{pairRow(p, "", nil)}, err
			}})
		case "enqueue-batch":
			steps = append(steps, step{sc, func(ctx context.Context, _ *status) ([]Row, error) {
				p, err := EnqueueBatch(ctx, env, cfg.Jobs)
				if err == nil {
					p.RawSame, err = EnqueueBatchSameShape(ctx, env, cfg.Jobs)
				}
				return []Row{pairRow(p, "ratio ≥ 0.9", atLeast(0.9))}, err
			}})
		case "schedule-enqueue":
			steps = append(steps, step{sc + " batch", func(ctx context.Context, _ *status) ([]Row, error) {
				s, err := EnqueueScheduled(ctx, env, cfg.Jobs)
				return scheduledRows(s, env), err
			}}, step{sc + " single", func(ctx context.Context, _ *status) ([]Row, error) {
				s, err := EnqueueSingleScheduled(ctx, env, cfg.Jobs)
				return scheduledRows(s, env), err
			}})
		case "schedule-burst":
			steps = append(steps, step{sc, func(ctx context.Context, _ *status) ([]Row, error) {
				b, err := ScheduledBurst(ctx, env, cfg.Burst)
				return burstRows(b), err
			}})
		case "process-unfenced", "process-fenced":
			fenced := sc == "process-fenced"
			for _, c := range cfg.Concurrency {
				for _, pre := range cfg.Prefetch {
					name := fmt.Sprintf("%s c=%d", sc, c)
					if pre > 0 {
						name += fmt.Sprintf(" prefetch=%d", pre)
					}
					steps = append(steps, step{name, func(ctx context.Context, _ *status) ([]Row, error) {
						p, err := Process(ctx, env, cfg.Jobs, c, pre, fenced)
						if env.JobTime > 0 {
							return []Row{pairRow(p, "", nil)}, err // the raw side is empty: no ratio to hold
						}
						if fenced {
							return []Row{pairRow(p, "ratio ≥ 0.4", atLeast(0.4))}, err
						}
						return []Row{pairRow(p, "ratio ≥ 0.85", atLeast(0.85))}, err
					}})
				}
			}
		case "process-priority":
			for _, c := range cfg.Concurrency {
				steps = append(steps, step{fmt.Sprintf("%s c=%d", sc, c), func(ctx context.Context, _ *status) ([]Row, error) {
					p, err := Priorities(ctx, env, cfg.Jobs, c)
					row := pairRow(p, "", nil)
					row.Notes = []string{"raw column: the same workq worker on the same number of jobs, all of the normal level"}
					return []Row{row}, err
				}})
			}
		case "latency":
			steps = append(steps, step{sc, func(ctx context.Context, _ *status) ([]Row, error) {
				l, err := EndToEnd(ctx, env, cfg.Samples)
				return latencyRows(l, 0), err
			}})
		case "wait":
			steps = append(steps, step{sc, func(ctx context.Context, _ *status) ([]Row, error) {
				l, err := WaitLatency(ctx, env, cfg.Samples)
				return latencyRows(l, 2*time.Millisecond), err
			}})
		case "workflow":
			for _, c := range cfg.Concurrency {
				steps = append(steps, step{fmt.Sprintf("%s fan-out/fan-in c=%d", sc, c), func(ctx context.Context, _ *status) ([]Row, error) {
					f, err := WorkflowFanOut(ctx, env, cfg.Jobs, c)
					return fanOutRows(f), err
				}})
			}
			steps = append(steps, step{sc + " release", func(ctx context.Context, _ *status) ([]Row, error) {
				l, err := WorkflowRelease(ctx, env, cfg.Samples)
				return releaseRows(l), err
			}})
		case "sequence":
			for _, c := range cfg.Concurrency {
				steps = append(steps, step{fmt.Sprintf("%s drain c=%d", sc, c), func(ctx context.Context, _ *status) ([]Row, error) {
					d, err := SequenceDrain(ctx, env, cfg.Jobs, cfg.sequenceKeys(), c)
					return drainRows(d), err
				}})
			}
			steps = append(steps, step{sc + " handoff", func(ctx context.Context, _ *status) ([]Row, error) {
				l, err := SequenceHandoff(ctx, env, cfg.Samples)
				return handoffRows(l), err
			}})
		case "redelivery":
			for _, crash := range []bool{false, true} {
				name := sc + " after stall"
				if crash {
					name = sc + " after crash"
				}
				steps = append(steps, step{name, func(ctx context.Context, _ *status) ([]Row, error) {
					l, err := Redelivery(ctx, env, cfg.Redeliveries, cfg.AckWait, crash)
					bound := cfg.AckWait + 250*time.Millisecond
					rows := latencyRows(l, 0)
					rows = append(rows, Row{Scenario: l.Scenario, Metric: "max ms", Workq: ms(l.Workq.Max), Raw: ms(l.Raw.Max), Ratio: ratio(l.Workq.Max, l.Raw.Max),
						Target: fmt.Sprintf("≤ AckWait + 250ms = %s", bound),
						check:  func(r Row) bool { return r.Workq <= ms(bound) }})
					return rows, err
				}})
			}
		case "lock":
			steps = append(steps, step{sc + " uncontended", func(ctx context.Context, _ *status) ([]Row, error) {
				l, err := LockUncontended(ctx, env, cfg.Samples)
				return latencyRows(l, 0), err
			}}, step{sc + " uncontended vs CAS", func(ctx context.Context, _ *status) ([]Row, error) {
				l, err := LockUncontendedMinimal(ctx, env, cfg.Samples)
				return latencyRows(l, 0), err
			}}, step{sc + " handoff", func(ctx context.Context, _ *status) ([]Row, error) {
				l, err := LockHandoff(ctx, env, cfg.Samples)
				return latencyRows(l, 5*time.Millisecond), err
			}})
		case "limiter":
			steps = append(steps, step{sc, func(ctx context.Context, _ *status) ([]Row, error) {
				p, err := Limiter(ctx, env, cfg.Jobs)
				r := pairRow(p, "", nil)
				r.Metric = "ops/s"
				return []Row{r}, err
			}})
		case "backlog":
			steps = append(steps, step{sc, func(ctx context.Context, st *status) ([]Row, error) {
				bc := cfg.Backlog
				if cfg.Child != nil {
					bc.Worker = childWorker(env.url(), cfg.Child, WorkerSettings{Concurrency: bc.Concurrency, Prefetch: bc.Prefetch, Fenced: bc.Fenced, Replicas: env.replicas()})
				}
				b, err := RunBacklog(ctx, env, bc, st.phase)
				return backlogRows(b), err
			}})
		}
	}
	return steps
}
