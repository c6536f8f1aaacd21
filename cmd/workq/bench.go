package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// The scenarios `workq bench` knows, in the order it runs them. The last two are not
// in the default set: they are long (a million jobs deep, 100 000 due at once).
var benchScenarios = []string{"enqueue-single", "enqueue-batch", "schedule-enqueue", "process-unfenced", "process-fenced", "process-priority", "latency", "redelivery", "lock", "limiter", "backlog", "schedule-burst"}

var defaultBenchScenarios = benchScenarios[:len(benchScenarios)-2]

type benchFlags struct {
	scenarios   []string
	runs        int
	jobs        int
	samples     int
	concurrency []int
	prefetch    []int
	ackWait     time.Duration
	redeliver   int
	backlog     int
	backlogBase int
	backlogC    int
	backlogPre  int
	burst       int
	burstC      int
	burstLead   time.Duration
	fenced      bool
	inProcess   bool
	json        bool
	syncAlways  bool
	groupCommit groupCommitFlag
	jobTime     time.Duration
	cluster     int
	replicas    int
	external    bool // --server given: a running server, nothing embedded
}

func (a *app) benchCommand() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure workq against raw JetStream doing the same thing",
		Long: `Run benchmark scenarios, each through workq and through the raw JetStream
equivalent in the same process against the same server, and print both and their
ratio (the median over --runs runs, with the spread of the ratio).

By default an embedded server with file storage is started in a temporary
directory and removed at the end. It fsyncs lazily, as nats-server does by default
(every 2 minutes); --sync-always makes it fsync every write (sync_interval: always),
which is what durable single-node processing costs. --cluster N starts an embedded
N-node cluster (3 to 5 nodes) instead and runs every scenario with N replicas, on
the workq side and on the raw side alike, so the ratios compare like with like;
--sync-always applies to every node. --server measures against a running server
(comma-separated URLs for a cluster); --replicas R then sets the replica count of
everything the scenarios create (default 1).

Scenarios (--scenario, comma separated; default all but backlog and schedule-burst):
  enqueue-single    producer.Enqueue vs js.Publish with a message id          (jobs/s)
  enqueue-batch     producer.EnqueueBatch vs js.PublishAsync, all acks awaited  (jobs/s)
  schedule-enqueue  delayed jobs (due in an hour), batch and single, vs raw @at
                    schedules, and vs workq's jobs to run at once               (jobs/s)
  process-unfenced  unfenced worker vs Consume + Ack, per --concurrency/--prefetch (jobs/s)
  process-fenced    fenced worker vs Consume + Ack; also vs raw doing the same
                    work (two KV writes and a confirmed ack per job)           (jobs/s)
  process-priority  fenced worker draining jobs spread over the 4 priority levels
                    vs the same worker on jobs of one level (both workq), per
                    --concurrency                                              (jobs/s)
  latency           enqueue → commit, one job at a time, vs publish → confirmed ack
  redelivery        a worker freezes (its link stalls) or crashes (its connection
                    closes) holding a job: time until another worker starts it, vs
                    JetStream redelivering an unacked message likewise (--ack-wait)
  lock              kvlock acquire+release vs KV create+delete; contended handoff
                    between 4 connections vs a KV watcher re-creating the key
  limiter           Limiter.Allow vs a plain publish to a stream of the same shape
  backlog           a worker draining --backlog-base then --backlog jobs: rate ratio
                    and the worker's peak RSS (the worker runs in a child process);
                    raw consume + ack likewise
  schedule-burst    --burst jobs due at one instant, workers running: from the due
                    time to the first start, all started, all done; vs raw @at
                    schedules with Consume + Ack, vs the same jobs enqueued at once
                    to waiting workers (from the enqueue's start), and vs the same
                    jobs waiting when the workers start; and the slowest enqueue
                    beside the burst as the server fires it

In process-fenced, "raw" is plain consume + ack. A WorkQueue stream deletes each
acked message; with --sync-always on one node each delete is its own fsync, which
bounds any processing there. "vs raw doing the same thing" adds what a fenced
worker needs per job: its claim (a KV create) and its commit (a compare-and-set over
the claim), one after the other, and a confirmed ack.

Latency ratios are workq's p50 over raw's (lower is better); throughput ratios are
workq's rate over raw's (higher is better). Targets are checked on the medians.
Where the "raw" column is workq itself (a scenario named "… (workq)"), the notes
under the table say what it holds.`,
		Example: `  workq bench                                   # default scenarios, one run
  workq bench --runs 3 --json > bench.json
  workq bench --scenario process-unfenced --concurrency 32 --prefetch 0,512
  workq bench --scenario backlog --backlog 1000000
  workq bench --runs 3 --scenario schedule-enqueue,schedule-burst --jobs 100000
  workq bench --sync-always --scenario process-fenced   # durable single node
  workq bench --cluster 3 --jobs 5000                    # R3 on 3 embedded nodes
  workq bench --server nats://a:4222,nats://b:4222,nats://c:4222 --replicas 3`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.external = cmd.Flags().Changed("server")
			if err := f.check(cmd.Flags().Changed("replicas")); err != nil {
				return err
			}
			return a.bench(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.scenarios, "scenario", defaultBenchScenarios, "scenarios to run: "+strings.Join(benchScenarios, ", "))
	fl.IntVar(&f.runs, "runs", 1, "runs of each scenario; the table shows medians")
	fl.IntVar(&f.jobs, "jobs", 20000, "jobs per throughput scenario (enqueue, process) and operations for the limiter")
	fl.IntVar(&f.samples, "samples", 300, "samples per latency scenario (latency, lock)")
	fl.IntSliceVar(&f.concurrency, "concurrency", []int{8, 32, 128}, "worker concurrencies for the process scenarios")
	fl.IntSliceVar(&f.prefetch, "prefetch", []int{0}, "worker prefetch for the process scenarios (0: the default, adaptive)")
	fl.DurationVar(&f.ackWait, "ack-wait", time.Second, "AckWait of the redelivery scenario")
	fl.IntVar(&f.redeliver, "redeliveries", 3, "stalls per run of the redelivery scenario")
	fl.IntVar(&f.backlog, "backlog", 1000000, "jobs in the deep backlog (backlog scenario)")
	fl.IntVar(&f.backlogBase, "backlog-base", 10000, "jobs in the base backlog it is compared with")
	fl.IntVar(&f.backlogC, "backlog-concurrency", 32, "worker concurrency in the backlog scenario")
	fl.IntVar(&f.backlogPre, "backlog-prefetch", 512, "worker prefetch in the backlog scenario")
	fl.BoolVar(&f.fenced, "backlog-fenced", false, "fenced worker in the backlog scenario (default unfenced: the fastest path, so that the backlog is what is measured)")
	fl.IntVar(&f.burst, "burst", 100000, "jobs due at the same instant (schedule-burst scenario)")
	fl.IntVar(&f.burstC, "burst-concurrency", 64, "worker concurrency in the schedule-burst scenario")
	fl.DurationVar(&f.burstLead, "burst-lead", 0, "how far ahead of the enqueue's start the burst is due (default: 1s plus 40µs a job); moved out, and said so, when the enqueue takes longer")
	fl.BoolVar(&f.inProcess, "backlog-in-process", false, "run the backlog worker in this process (no RSS figure; for tests)")
	fl.BoolVar(&f.json, "json", false, "print the results as JSON")
	fl.Var(&f.groupCommit, "group-commit", "workq's group commit (consumer.GroupCommit, producer.GroupCommit): on, off, or auto — on with --sync-always, else the library's default (on for replicated queues)")
	fl.DurationVar(&f.jobTime, "job-time", 0, "how long each job's handler takes in the process scenarios (workq side; the raw side stays empty, so compare workq's column between runs, not the ratio); 0: empty handlers")
	fl.BoolVar(&f.syncAlways, "sync-always", false, "the embedded server (every node with --cluster) fsyncs every write; not with --server")
	fl.IntVar(&f.cluster, "cluster", 0, "start an embedded cluster of this many nodes (3 to 5) and use as many replicas; 0: a single server")
	fl.IntVar(&f.replicas, "replicas", 1, "with --server: replicas of every stream, bucket and consumer the scenarios create (1 to 5)")
	_ = fl.MarkHidden("backlog-in-process")
	return cmd
}

// check checks the flags and sets the replica count of an embedded cluster.
// replicasSet says whether --replicas was given.
func (f *benchFlags) check(replicasSet bool) error {
	for i, s := range f.scenarios {
		s = strings.TrimSpace(s)
		f.scenarios[i] = s
		if !slices.Contains(benchScenarios, s) {
			return usageError{fmt.Errorf("--scenario %q: want one of %s", s, strings.Join(benchScenarios, ", "))}
		}
	}
	switch {
	case f.runs < 1:
		return usageError{fmt.Errorf("--runs %d: want at least 1", f.runs)}
	case f.jobs < 10:
		return usageError{fmt.Errorf("--jobs %d: want at least 10", f.jobs)}
	case f.samples < 1 || f.redeliver < 1:
		return usageError{errors.New("--samples and --redeliveries: want at least 1")}
	case f.ackWait < 100*time.Millisecond:
		return usageError{fmt.Errorf("--ack-wait %s: want at least 100ms", f.ackWait)}
	case f.backlog < 1 || f.backlogBase < 1:
		return usageError{errors.New("--backlog and --backlog-base: want at least 1")}
	case f.backlogC < 1 || f.backlogPre < 1:
		return usageError{errors.New("--backlog-concurrency and --backlog-prefetch: want at least 1")}
	case f.burst < 1 || f.burstC < 1:
		return usageError{errors.New("--burst and --burst-concurrency: want at least 1")}
	case f.burstLead < 0:
		return usageError{fmt.Errorf("--burst-lead %s: want 0 (default) or more", f.burstLead)}
	}
	switch {
	case f.cluster != 0 && (f.cluster < 3 || f.cluster > 5):
		return usageError{fmt.Errorf("--cluster %d: want 3 to 5 nodes (a cluster needs a quorum that survives a node, and a stream has at most 5 replicas), or 0 for a single server", f.cluster)}
	case f.cluster > 0 && f.external:
		return usageError{errors.New("--cluster starts an embedded cluster; it does not go with --server (use --replicas with a running cluster)")}
	case f.syncAlways && f.external:
		return usageError{errors.New("--sync-always configures the embedded server; it does not go with --server (set sync_interval: always in the server's config)")}
	case f.replicas < 1 || f.replicas > 5:
		return usageError{fmt.Errorf("--replicas %d: want 1 to 5", f.replicas)}
	case replicasSet && !f.external && f.cluster == 0 && f.replicas != 1:
		return usageError{fmt.Errorf("--replicas %d: the embedded server is a single node (R1); use --cluster N for N replicas, or --server with a running cluster", f.replicas)}
	case replicasSet && f.cluster > 0 && f.replicas != f.cluster:
		return usageError{fmt.Errorf("--replicas %d: --cluster %d runs every scenario with %d replicas", f.replicas, f.cluster, f.cluster)}
	}
	if f.cluster > 0 {
		f.replicas = f.cluster
	}
	for _, c := range f.concurrency {
		if c < 1 {
			return usageError{fmt.Errorf("--concurrency %d: want at least 1", c)}
		}
	}
	for _, p := range f.prefetch {
		if p < 0 {
			return usageError{fmt.Errorf("--prefetch %d: want 0 (default) or more", p)}
		}
	}
	return nil
}

// benchRow is one figure of one scenario: workq's value, raw's, and their ratio,
// the medians over the runs.
type benchRow struct {
	Scenario string  `json:"scenario"`
	Metric   string  `json:"metric"` // jobs/s, ops/s, p50 ms, p99 ms, max ms, MiB, x
	Workq    float64 `json:"workq"`
	Raw      float64 `json:"raw,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
	// RatioMin and RatioMax are the spread of the ratio over the runs.
	RatioMin float64 `json:"ratio_min,omitempty"`
	RatioMax float64 `json:"ratio_max,omitempty"`
	// RawSame is raw JetStream doing the same work as workq (fenced processing).
	RawSame     float64   `json:"raw_same,omitempty"`
	RatioSame   float64   `json:"ratio_same,omitempty"`
	Target      string    `json:"target,omitempty"`
	Met         *bool     `json:"met,omitempty"`
	Runs        int       `json:"runs"`
	WorkqPerRun []float64 `json:"workq_per_run"`
	RawPerRun   []float64 `json:"raw_per_run,omitempty"`
	// Notes say what the figures are where the columns do not (what the "raw"
	// column holds when it is not raw JetStream, the settings a run chose); when runs
	// said different things, each run's are prefixed with its number.
	Notes         []string              `json:"notes,omitempty"`
	check         func(r benchRow) bool // the target, on the medians
	ratios, sames []float64
	runNotes      [][]string
}

// finish turns the per-run values into medians and checks the target.
func (r *benchRow) finish() {
	r.Runs = len(r.WorkqPerRun)
	r.Workq = median(r.WorkqPerRun)
	r.Raw = median(r.RawPerRun)
	r.Ratio = median(r.ratios)
	if len(r.ratios) > 1 {
		r.RatioMin, r.RatioMax = slices.Min(r.ratios), slices.Max(r.ratios)
	}
	r.Notes = nil
	for i, ns := range r.runNotes {
		if !slices.ContainsFunc(r.runNotes, func(o []string) bool { return !slices.Equal(o, ns) }) {
			r.Notes = ns // every run said the same
			break
		}
		for _, n := range ns {
			r.Notes = append(r.Notes, fmt.Sprintf("run %d: %s", i+1, n))
		}
	}
	r.RawSame = median(r.sames)
	if r.RawSame > 0 {
		r.RatioSame = r.Workq / r.RawSame
	}
	if r.check != nil {
		met := r.check(*r)
		r.Met = &met
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

type benchReport struct {
	Server string `json:"server"`
	// Replicas of everything the scenarios created, workq's and raw's alike.
	Replicas int `json:"replicas"`
	// GroupCommit is workq's group commit in the run: on, off, or auto (the
	// library's default: on for replicated queues).
	GroupCommit string     `json:"group_commit"`
	Machine     benchHost  `json:"machine"`
	Runs        int        `json:"runs"`
	Started     time.Time  `json:"started"`
	Took        string     `json:"took"`
	Results     []benchRow `json:"results"`
}

type benchHost struct {
	CPUs int    `json:"cpus"`
	OS   string `json:"os"`
	Arch string `json:"arch"`
	Go   string `json:"go"`
}

func (a *app) bench(ctx context.Context, f benchFlags) error {
	rep := benchReport{Runs: f.runs, Replicas: f.replicas, Started: time.Now(), Machine: benchHost{CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version()}}
	srv, err := a.benchServer(ctx, f)
	if err != nil {
		return err
	}
	defer srv.close()
	rep.Server = srv.desc
	rep.GroupCommit = "auto"
	if on, set := f.groupCommit.set(); set || f.syncAlways {
		on = on || !set // auto with --sync-always: on
		srv.env.GroupCommit = &on
		rep.GroupCommit = map[bool]string{true: "on", false: "off"}[on]
	}

	srv.env.JobTime = f.jobTime
	steps := a.benchSteps(f, srv.env)
	st := newStatus(a.stderr, len(steps)*f.runs)
	rows := map[string]*benchRow{}
	var order []string
	for run := 1; run <= f.runs; run++ {
		for _, s := range steps {
			st.step(fmt.Sprintf("%s (run %d/%d)", s.name, run, f.runs))
			out, err := s.run(ctx, st)
			if err != nil {
				st.clear()
				if ctx.Err() != nil {
					return exitCodeError{code: exitError, msg: "bench interrupted"}
				}
				return fmt.Errorf("bench %s: %w", s.name, err)
			}
			for _, r := range out {
				k := r.Scenario + "\x00" + r.Metric
				agg, ok := rows[k]
				if !ok {
					c := r
					c.WorkqPerRun, c.RawPerRun, c.Notes = nil, nil, nil
					agg = &c
					rows[k] = agg
					order = append(order, k)
				}
				agg.WorkqPerRun = append(agg.WorkqPerRun, r.Workq)
				if r.Raw != 0 || r.Ratio != 0 {
					agg.RawPerRun = append(agg.RawPerRun, r.Raw)
				}
				agg.runNotes = append(agg.runNotes, r.Notes)
				agg.ratios = append(agg.ratios, r.Ratio)
				agg.sames = append(agg.sames, r.RawSame)
			}
		}
	}
	st.clear()
	for _, k := range order {
		r := rows[k]
		r.finish()
		rep.Results = append(rep.Results, *r)
	}
	rep.Took = time.Since(rep.Started).Round(time.Second).String()
	if f.json {
		return writeJSON(a.stdout, rep)
	}
	return printBench(a.stdout, rep)
}
