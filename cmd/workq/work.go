package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/workq/workq/cmd/workq/internal/proc"
	"github.com/workq/workq/consumer"
)

// permanentExitDefault is the exit status by which a work command says "this job
// can never succeed": the job goes to dead letters at once instead of retrying.
const permanentExitDefault = 100

// workFlags is `workq work`: the queue, the command to run per job, and the flags.
type workFlags struct {
	queue         string
	argv          []string // the command and its arguments, after "--"
	concurrency   int
	ackWait       time.Duration
	maxAttempts   int
	timeout       time.Duration
	drainTimeout  time.Duration
	backoff       time.Duration
	backoffMax    time.Duration
	permanentExit int
	killGrace     time.Duration
	maxResult     int
	prefetch      int
	prefetchSet   bool // --prefetch given: only then is consumer.Prefetch passed
	name          string
	verbose       bool
	metricsAddr   string
	groupCommit   groupCommitFlag
	otel          bool

	metricsListen string // --metrics-addr as validate made it: loopback for a port alone
}

func (a *app) workCommand() *cobra.Command {
	f := &workFlags{}
	cmd := &cobra.Command{
		Use:   "work <queue> -- command [args...]",
		Short: "Run a command once per job of a queue",
		Long: `Run a command once per job, as a workq worker (fenced: exactly one result per job).

The job's payload is the command's stdin. Its environment has:
  WORKQ_QUEUE, WORKQ_JOB_ID, WORKQ_JOB_KIND, WORKQ_ATTEMPT, WORKQ_MAX_ATTEMPTS,
  WORKQ_FENCING_TOKEN, WORKQ_JOB_SEQUENCE, WORKQ_WORKER, and WORKQ_HEADER_<NAME>
  for each job header (upper case, '-' as '_').

Exit status 0 commits the job with the command's stdout as its result. Exit
status 100 (--permanent-exit) fails the job for good: it goes to dead letters.
Any other status, a signal or --timeout fails this attempt: the job is retried
after a backoff until --max-attempts, then dead-lettered. The command's stderr
passes through to workq's.

The command runs in its own process group; --timeout, a lost job and a drain
that runs out kill the group (SIGTERM, then SIGKILL after --kill-grace); on
Linux a workq that is killed takes its commands and their children with it
(SIGKILL, by a guard process in each command's group). A
command that outlives its job's ownership (this worker stalled past --ack-wait
and the job went to another worker) gets its commit refused, logged as
"job <id> was reassigned".

SIGINT or SIGTERM drains: no new jobs are taken, running commands may finish for
--drain-timeout, the rest are handed back; workq logs that it is draining. A
second signal exits at once.

--max-result is bounded by the server's max_payload: a result is stored base64 in
the job record, a JSON document that must fit one message, so the largest result
is about (max_payload - 30 KiB) * 3/4 (763407 bytes with the default 1 MiB); more
is a usage error.

workq logs when it loses its connection to NATS and when it regains it (jobs
keep running meanwhile; their commits wait for the connection), and, with
--wait, once when the server is not reachable yet at start.`,
		Example: `  workq work emails -- ./send-email.sh
  workq work thumbs --concurrency 4 --timeout 1m -- sh -c 'convert - -thumbnail 64x64 png:-'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			before, argv, err := commandArgs(cmd, args, 1, "<queue>")
			if err != nil {
				return err
			}
			f.queue, f.argv = before[0], argv
			f.prefetchSet = cmd.Flags().Changed("prefetch")
			return a.execute(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&f.concurrency, "concurrency", "c", 1, "jobs run at once")
	fl.DurationVar(&f.ackWait, "ack-wait", consumer.DefaultAckWait, "how long a job may go without a heartbeat before it moves to another worker (every worker of a queue must agree)")
	fl.IntVar(&f.maxAttempts, "max-attempts", consumer.DefaultMaxAttempts, "runs before a failing job is dead-lettered (a job's own limit wins)")
	fl.DurationVar(&f.timeout, "timeout", 0, "kill the command's process group after this long (default: no limit)")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", consumer.DefaultDrainTimeout, "on SIGINT/SIGTERM, how long running commands may finish")
	fl.DurationVar(&f.backoff, "backoff", consumer.DefaultBackoffBase, "delay before the first retry; doubles per attempt, with jitter")
	fl.DurationVar(&f.backoffMax, "backoff-max", consumer.DefaultBackoffLimit, "longest retry delay")
	fl.IntVar(&f.permanentExit, "permanent-exit", permanentExitDefault, "exit status meaning permanent failure (dead letter, no retry)")
	fl.DurationVar(&f.killGrace, "kill-grace", 5*time.Second, "after SIGTERM to a killed command's group, wait this long before SIGKILL")
	fl.IntVar(&f.maxResult, "max-result", 512<<10, "largest stdout stored as the job's result, in bytes; more fails the job for good (at most about (server max_payload - 30 KiB) * 3/4)")
	fl.IntVar(&f.prefetch, "prefetch", 0, "jobs pulled ahead of free handlers (default adaptive; 0: none beyond the running ones)")
	fl.StringVar(&f.name, "name", "", "worker name in job records and logs (default host-pid)")
	fl.Var(&f.groupCommit, "group-commit", groupCommitUsage)
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log every job's outcome")
	fl.BoolVar(&f.otel, "otel", false, otelUsage)
	addMetricsFlag(fl, &f.metricsAddr)
	return cmd
}

func (f *workFlags) validate() error {
	switch {
	case f.concurrency < 1:
		return fmt.Errorf("--concurrency %d: want ≥ 1", f.concurrency)
	case f.maxAttempts < 1:
		return fmt.Errorf("--max-attempts %d: want ≥ 1", f.maxAttempts)
	case f.ackWait < 100*time.Millisecond:
		return fmt.Errorf("--ack-wait %s: want at least 100ms", f.ackWait)
	case f.timeout < 0 || f.drainTimeout < 0 || f.backoff < 0 || f.backoffMax < f.backoff || f.killGrace < 0:
		return errors.New("durations must be ≥ 0, and --backoff-max ≥ --backoff")
	case f.permanentExit < 1 || f.permanentExit > 255:
		return fmt.Errorf("--permanent-exit %d: want 1 to 255", f.permanentExit)
	case f.maxResult < 0:
		return fmt.Errorf("--max-result %d: want ≥ 0", f.maxResult)
	case f.prefetchSet && f.prefetch < 0:
		return fmt.Errorf("--prefetch %d: want ≥ 0", f.prefetch)
	}
	var err error
	f.metricsListen, err = metricsListenAddr(f.metricsAddr)
	return err
}

// run runs the worker until ctx ends (SIGINT or SIGTERM), then drains it.
func (f *workFlags) run(ctx context.Context, a *app) error {
	if err := proc.Find(f.argv[0]); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(&lineWriter{w: a.stderr}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a.connLog = log
	c, err := a.connect(ctx, "work "+f.queue, true)
	if err != nil {
		return err
	}
	defer c.Close()
	if most := maxResultFor(c.nc.MaxPayload()); int64(f.maxResult) > most {
		return usageError{fmt.Errorf("--max-result %d: the server's max_payload is %d bytes, so a job record holds a result of at most %d bytes (base64 in a JSON record, with room for its other fields at their largest)",
			f.maxResult, c.nc.MaxPayload(), most)}
	}

	r := &commandRunner{argv: f.argv, queue: f.queue, flags: f, stderr: a.stderr, log: log}
	var reg *prometheus.Registry
	if f.metricsListen != "" {
		reg = newRegistry()
	}
	opts := f.options(log, reg)
	if f.otel {
		if r.tracing, err = startTracing(ctx); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := r.tracing.shutdown(sctx); err != nil {
				log.Warn("--otel: spans not exported at exit", "err", err)
			}
		}()
		opts = append(opts, consumer.Tracing(r.tracing.tracer))
	}
	octx, cancel := a.opCtx(ctx)
	w, err := consumer.New(octx, c.js, f.queue, r, opts...)
	cancel()
	if err != nil {
		if errors.Is(err, consumer.ErrIncompatible) {
			return f.incompatible(ctx, a, c, err)
		}
		return err
	}
	r.worker = w.Name()
	if reg != nil {
		ms, err := serveQueueMetrics(f.metricsListen, reg, c.nc, c.js, []string{f.queue}, w.Health)
		if err != nil {
			return err
		}
		defer ms.Close()
		log.Info("serving metrics", "url", "http://"+ms.addr+"/metrics", "health", "http://"+ms.addr+"/healthz")
	}
	log.Info("worker started", "queue", f.queue, "worker", w.Name(), "server", c.url, "concurrency", f.concurrency, "ack_wait", f.ackWait)
	ran := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done(): // the first SIGINT/SIGTERM
			log.Info("draining: taking no new jobs; running commands may finish, signal again to exit now",
				"drain_timeout", f.drainTimeout)
		case <-ran:
		}
	}()
	runErr := w.Run(ctx)
	close(ran)
	s := w.Stats()
	log.Info("worker stopped", "committed", s.Committed, "retried", s.Retried, "dead", s.Dead,
		"reassigned", s.Reassigned, "handed_back", s.HandedBack, "errors", s.Errors)
	return c.lostTo(&a.conn, runErr)
}

// options are the worker's options from the flags, logging to log and, if reg is
// not nil, counting in it.
func (f *workFlags) options(log *slog.Logger, reg *prometheus.Registry) []consumer.Option {
	opts := []consumer.Option{
		consumer.Concurrency(f.concurrency),
		consumer.AckWait(f.ackWait),
		consumer.MaxAttempts(f.maxAttempts),
		consumer.DrainTimeout(f.drainTimeout),
		consumer.Backoff(consumer.Exponential(f.backoff, f.backoffMax)),
		consumer.Logger(log),
	}
	if f.timeout > 0 {
		opts = append(opts, consumer.Timeout(f.timeout))
	}
	if f.name != "" {
		opts = append(opts, consumer.Name(f.name))
	}
	if f.prefetchSet {
		opts = append(opts, consumer.Prefetch(f.prefetch))
	}
	if reg != nil {
		opts = append(opts, consumer.Metrics(reg))
	}
	return append(opts, f.groupCommit.worker())
}

// incompatible explains err, the queue's refusal of this worker's settings: when
// its workers use another ack wait, it names both and how to change it.
func (f *workFlags) incompatible(ctx context.Context, a *app, c *conn, err error) error {
	q := f.queue
	ictx, cancel := a.opCtx(ctx)
	defer cancel()
	if qi, ierr := c.admin.Queue(ictx, q); ierr == nil && qi.Workers && time.Duration(qi.AckWait) != f.ackWait {
		return fmt.Errorf("queue %s: its workers use --ack-wait %s, this worker asked for %s; every worker of a queue must use the same ack wait (to change it, stop the workers and run 'workq queue set %s --ack-wait %s')",
			q, qi.AckWait, f.ackWait, q, f.ackWait)
	}
	return fmt.Errorf("queue %s: the workers' consumer has other settings: %v", q, strip(err))
}

// maxResultFor is the largest result a job record holds on a server whose
// max_payload is maxPayload (consumer.MaxResultSize): more would be dead-lettered.
func maxResultFor(maxPayload int64) int64 { return int64(consumer.MaxResultSize(maxPayload)) }
