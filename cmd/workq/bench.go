package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/workq/workq/cmd/workq/internal/bench"
)

// `workq bench` is the command over the harness in internal/bench: this file holds
// its flags and their checks, and wires the harness to the CLI's connection (the
// running server of --server, the credentials its worker process gets) and output.

// benchFlags is `workq bench`: what the harness runs, and where.
type benchFlags struct {
	cfg         bench.Config
	inProcess   bool // --backlog-in-process: no worker process
	groupCommit groupCommitFlag
	syncAlways  bool
	cluster     int
	replicas    int
	json        bool
	external    bool // --server given: a running server, nothing embedded
	replicasSet bool // --replicas given
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

Scenarios (--scenario, comma separated; default all but workflow, sequence,
backlog and schedule-burst):
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
  wait              producer.Wait: a job's commit → Wait returning its record, one
                    job at a time, vs a KV Put → a watch delivering it
  redelivery        a worker freezes (its link stalls) or crashes (its connection
                    closes) holding a job: time until another worker starts it, vs
                    JetStream redelivering an unacked message likewise (--ack-wait)
  lock              kvlock acquire+release vs KV create+delete; contended handoff
                    between 4 connections vs a KV watcher re-creating the key
  limiter           Limiter.Allow vs a plain publish to a stream of the same shape
  workflow          a fan-out/fan-in workflow of --jobs tasks (a root, the others
                    after it, a last one after them all), from the enqueue's start
                    to the last commit, vs the same jobs without dependencies
                    (EnqueueBatch), per --concurrency                          (jobs/s);
                    and a chain of --samples links: a parent's commit → its
                    dependent's start, vs a lone job's enqueue → start (both workq)
  sequence          --jobs jobs over --sequence-keys keys (default 10 jobs a key),
                    each key's in order, from the enqueue's start to the last
                    commit, vs the same jobs without keys (EnqueueBatch), per
                    --concurrency                                              (jobs/s);
                    and one hot key of --samples+1 jobs: a job's commit → the
                    next one's start, vs a lone job's enqueue → start (both workq)
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
			f.replicasSet = cmd.Flags().Changed("replicas")
			return a.execute(cmd.Context(), &f)
		},
	}
	c := &f.cfg
	fl := cmd.Flags()
	fl.StringSliceVar(&c.Scenarios, "scenario", bench.DefaultScenarios, "scenarios to run: "+strings.Join(bench.Scenarios, ", "))
	fl.IntVar(&c.Runs, "runs", 1, "runs of each scenario; the table shows medians")
	fl.IntVar(&c.Jobs, "jobs", 20000, "jobs per throughput scenario (enqueue, process), tasks of the workflow fan-out/fan-in, keyed jobs of the sequence drain, and operations for the limiter")
	fl.IntVar(&c.SequenceKeys, "sequence-keys", 0, "keys the sequence scenario spreads --jobs over (0: --jobs/10, 10 jobs a key)")
	fl.IntVar(&c.Samples, "samples", 300, "samples per latency scenario (latency, wait, lock), links of the workflow chain and handoffs of the sequence scenario's hot key")
	fl.IntSliceVar(&c.Concurrency, "concurrency", []int{8, 32, 128}, "worker concurrencies for the process, workflow and sequence scenarios")
	fl.IntSliceVar(&c.Prefetch, "prefetch", []int{0}, "worker prefetch for the process scenarios (0: the default, adaptive)")
	fl.DurationVar(&c.AckWait, "ack-wait", time.Second, "AckWait of the redelivery scenario")
	fl.IntVar(&c.Redeliveries, "redeliveries", 3, "stalls per run of the redelivery scenario")
	fl.IntVar(&c.Backlog.N, "backlog", 1000000, "jobs in the deep backlog (backlog scenario)")
	fl.IntVar(&c.Backlog.Base, "backlog-base", 10000, "jobs in the base backlog it is compared with")
	fl.IntVar(&c.Backlog.Concurrency, "backlog-concurrency", 32, "worker concurrency in the backlog scenario")
	fl.IntVar(&c.Backlog.Prefetch, "backlog-prefetch", 512, "worker prefetch in the backlog scenario")
	fl.BoolVar(&c.Backlog.Fenced, "backlog-fenced", false, "fenced worker in the backlog scenario (default unfenced: the fastest path, so that the backlog is what is measured)")
	fl.IntVar(&c.Burst.N, "burst", 100000, "jobs due at the same instant (schedule-burst scenario)")
	fl.IntVar(&c.Burst.Concurrency, "burst-concurrency", 64, "worker concurrency in the schedule-burst scenario")
	fl.DurationVar(&c.Burst.Lead, "burst-lead", 0, "how far ahead of the enqueue's start the burst is due (default: 1s plus 40µs a job); moved out, and said so, when the enqueue takes longer")
	fl.BoolVar(&f.inProcess, "backlog-in-process", false, "run the backlog worker in this process (no RSS figure; for tests)")
	fl.BoolVar(&f.json, "json", false, "print the results as JSON")
	fl.Var(&f.groupCommit, "group-commit", "workq's group commit (consumer.GroupCommit, producer.GroupCommit): on, off, or auto — on with --sync-always, else the library's default (on for replicated queues)")
	fl.DurationVar(&c.JobTime, "job-time", 0, "how long each job's handler takes in the process scenarios (workq side; the raw side stays empty, so compare workq's column between runs, not the ratio); 0: empty handlers")
	fl.BoolVar(&f.syncAlways, "sync-always", false, "the embedded server (every node with --cluster) fsyncs every write; not with --server")
	fl.IntVar(&f.cluster, "cluster", 0, "start an embedded cluster of this many nodes (3 to 5) and use as many replicas; 0: a single server")
	fl.IntVar(&f.replicas, "replicas", 1, "with --server: replicas of every stream, bucket and consumer the scenarios create (1 to 5)")
	_ = fl.MarkHidden("backlog-in-process")
	return cmd
}

// validate checks the flags and sets the replica count of an embedded cluster.
func (f *benchFlags) validate() error {
	for i, s := range f.cfg.Scenarios {
		s = strings.TrimSpace(s)
		f.cfg.Scenarios[i] = s
		if !slices.Contains(bench.Scenarios, s) {
			return fmt.Errorf("--scenario %q: want one of %s", s, strings.Join(bench.Scenarios, ", "))
		}
	}
	switch {
	case f.cfg.Runs < 1:
		return fmt.Errorf("--runs %d: want at least 1", f.cfg.Runs)
	case f.cfg.Jobs < 10:
		return fmt.Errorf("--jobs %d: want at least 10", f.cfg.Jobs)
	case f.cfg.SequenceKeys < 0 || f.cfg.SequenceKeys > f.cfg.Jobs:
		return fmt.Errorf("--sequence-keys %d: want 1 to --jobs (%d), or 0 for --jobs/10", f.cfg.SequenceKeys, f.cfg.Jobs)
	case f.cfg.Samples < 1 || f.cfg.Redeliveries < 1:
		return errors.New("--samples and --redeliveries: want at least 1")
	case f.cfg.AckWait < 100*time.Millisecond:
		return fmt.Errorf("--ack-wait %s: want at least 100ms", f.cfg.AckWait)
	case f.cfg.Backlog.N < 1 || f.cfg.Backlog.Base < 1:
		return errors.New("--backlog and --backlog-base: want at least 1")
	case f.cfg.Backlog.Concurrency < 1 || f.cfg.Backlog.Prefetch < 1:
		return errors.New("--backlog-concurrency and --backlog-prefetch: want at least 1")
	case f.cfg.Burst.N < 1 || f.cfg.Burst.Concurrency < 1:
		return errors.New("--burst and --burst-concurrency: want at least 1")
	case f.cfg.Burst.Lead < 0:
		return fmt.Errorf("--burst-lead %s: want 0 (default) or more", f.cfg.Burst.Lead)
	}
	switch {
	case f.cluster != 0 && (f.cluster < 3 || f.cluster > 5):
		return fmt.Errorf("--cluster %d: want 3 to 5 nodes (a cluster needs a quorum that survives a node, and a stream has at most 5 replicas), or 0 for a single server", f.cluster)
	case f.cluster > 0 && f.external:
		return errors.New("--cluster starts an embedded cluster; it does not go with --server (use --replicas with a running cluster)")
	case f.syncAlways && f.external:
		return errors.New("--sync-always configures the embedded server; it does not go with --server (set sync_interval: always in the server's config)")
	case f.replicas < 1 || f.replicas > 5:
		return fmt.Errorf("--replicas %d: want 1 to 5", f.replicas)
	case f.replicasSet && !f.external && f.cluster == 0 && f.replicas != 1:
		return fmt.Errorf("--replicas %d: the embedded server is a single node (R1); use --cluster N for N replicas, or --server with a running cluster", f.replicas)
	case f.replicasSet && f.cluster > 0 && f.replicas != f.cluster:
		return fmt.Errorf("--replicas %d: --cluster %d runs every scenario with %d replicas", f.replicas, f.cluster, f.cluster)
	}
	if f.cluster > 0 {
		f.replicas = f.cluster
	}
	for _, c := range f.cfg.Concurrency {
		if c < 1 {
			return fmt.Errorf("--concurrency %d: want at least 1", c)
		}
	}
	for _, p := range f.cfg.Prefetch {
		if p < 0 {
			return fmt.Errorf("--prefetch %d: want 0 (default) or more", p)
		}
	}
	return nil
}

// run runs the scenarios on the server the flags chose and prints the report.
func (f *benchFlags) run(ctx context.Context, a *app) error {
	srv, err := a.benchServer(ctx, f)
	if err != nil {
		return err
	}
	defer srv.Close()
	cfg := f.cfg
	if on, set := f.groupCommit.set(); set {
		cfg.GroupCommit = &on
	}
	if !f.inProcess {
		cfg.Child = a.childLogin
	}
	var progress io.Writer
	if isTerminal(a.stderr) {
		progress = a.stderr
	}
	rep, err := bench.Run(ctx, srv, cfg, progress)
	if err != nil {
		if ctx.Err() != nil {
			return exitCodeError{code: exitError, msg: "bench interrupted"}
		}
		return err
	}
	if f.json {
		return writeJSON(a.stdout, rep)
	}
	return rep.Print(a.stdout)
}

// benchServer starts the embedded single server or, with --cluster, the embedded
// cluster, or connects to the running server(s) of --server as every command
// connects, extra connections (lock holders, a stalling worker's) included.
func (a *app) benchServer(ctx context.Context, f *benchFlags) (*bench.Server, error) {
	if !f.external {
		return bench.Embedded(f.cluster, f.syncAlways)
	}
	c, err := a.connect(ctx, "bench", false)
	if err != nil {
		return nil, err
	}
	env := bench.Env{JS: c.js, Replicas: f.replicas, URL: a.conn.server, Dial: func(ctx context.Context, url string) (*nats.Conn, error) {
		b := *a
		b.conn.server = url
		c, err := b.connect(ctx, "bench", false)
		if err != nil {
			return nil, err
		}
		return c.nc, nil
	}}
	return bench.External(ctx, env, c.url, c.Close), nil
}

// childLogin is how the backlog's worker process connects to url as this process
// does: the TLS files as flags, the URL and credentials in its environment (not on
// its command line, where other users can read them).
func (a *app) childLogin(url string) (args, env []string) {
	f := a.conn
	for _, fl := range [][2]string{{"tls-cert", f.tlsCert}, {"tls-key", f.tlsKey}, {"tls-ca", f.tlsCA}} {
		if fl[1] != "" {
			args = append(args, "--"+fl[0], fl[1])
		}
	}
	env = []string{"NATS_URL=" + url, "NATS_CREDS=" + f.creds, "NATS_NKEY=" + f.nkey,
		"NATS_USER=" + f.user, "NATS_PASSWORD=" + f.password, "NATS_TOKEN=" + f.token}
	return args, env
}

// benchWorkerCommand registers the hidden `workq bench-worker`, the worker process
// of the backlog scenario (bench.WorkerProcess). It must exist: the scenario reports
// the worker's peak RSS, which is its own only in a process of its own (with the
// embedded server, the bench process also holds the server), and that process is
// this binary re-executed, connecting as this one did through the CLI's connection
// flags. Hidden: it is plumbing, not a user command.
func (a *app) benchWorkerCommand() *cobra.Command {
	var p bench.WorkerProcess
	cmd := &cobra.Command{
		Use:    bench.WorkerCommand,
		Short:  "Worker process of 'workq bench --scenario backlog'",
		Hidden: true,
		Args:   exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := p.Check(); err != nil {
				return usageError{err}
			}
			c, err := a.connect(cmd.Context(), bench.WorkerCommand, false)
			if err != nil {
				return err
			}
			defer c.Close()
			return p.Run(cmd.Context(), c.js, a.stdout)
		},
	}
	p.Register(cmd.Flags())
	return cmd
}
