package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/admin"
)

// permanentExitDefault is the exit status by which a work command says "this job
// can never succeed": the job goes to dead letters at once instead of retrying.
const permanentExitDefault = 100

type workFlags struct {
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
}

func (a *app) workCommand() *cobra.Command {
	var f workFlags
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
is about (max_payload - 4 KiB) * 3/4 (783360 bytes with the default 1 MiB); more
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
			f.prefetchSet = cmd.Flags().Changed("prefetch")
			return a.work(cmd.Context(), before[0], argv, f)
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&f.concurrency, "concurrency", "c", 1, "jobs run at once")
	fl.DurationVar(&f.ackWait, "ack-wait", 30*time.Second, "how long a job may go without a heartbeat before it moves to another worker (every worker of a queue must agree)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 10, "runs before a failing job is dead-lettered (a job's own limit wins)")
	fl.DurationVar(&f.timeout, "timeout", 0, "kill the command's process group after this long (default: no limit)")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long running commands may finish")
	fl.DurationVar(&f.backoff, "backoff", time.Second, "delay before the first retry; doubles per attempt, with jitter")
	fl.DurationVar(&f.backoffMax, "backoff-max", 5*time.Minute, "longest retry delay")
	fl.IntVar(&f.permanentExit, "permanent-exit", permanentExitDefault, "exit status meaning permanent failure (dead letter, no retry)")
	fl.DurationVar(&f.killGrace, "kill-grace", 5*time.Second, "after SIGTERM to a killed command's group, wait this long before SIGKILL")
	fl.IntVar(&f.maxResult, "max-result", 512<<10, "largest stdout stored as the job's result, in bytes; more fails the job for good (at most about (server max_payload - 4 KiB) * 3/4)")
	fl.IntVar(&f.prefetch, "prefetch", 0, "jobs pulled ahead of free handlers (default adaptive; 0: none beyond the running ones)")
	fl.StringVar(&f.name, "name", "", "worker name in job records and logs (default host-pid)")
	fl.Var(&f.groupCommit, "group-commit", groupCommitUsage)
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log every job's outcome")
	addMetricsFlag(fl, &f.metricsAddr)
	return cmd
}

func (a *app) work(ctx context.Context, q string, argv []string, f workFlags) error {
	switch {
	case f.concurrency < 1:
		return usageError{fmt.Errorf("--concurrency %d: want ≥ 1", f.concurrency)}
	case f.maxAttempts < 1:
		return usageError{fmt.Errorf("--max-attempts %d: want ≥ 1", f.maxAttempts)}
	case f.ackWait < 100*time.Millisecond:
		return usageError{fmt.Errorf("--ack-wait %s: want at least 100ms", f.ackWait)}
	case f.timeout < 0 || f.drainTimeout < 0 || f.backoff < 0 || f.backoffMax < f.backoff || f.killGrace < 0:
		return usageError{errors.New("durations must be ≥ 0, and --backoff-max ≥ --backoff")}
	case f.permanentExit < 1 || f.permanentExit > 255:
		return usageError{fmt.Errorf("--permanent-exit %d: want 1 to 255", f.permanentExit)}
	case f.maxResult < 0:
		return usageError{fmt.Errorf("--max-result %d: want ≥ 0", f.maxResult)}
	case f.prefetchSet && f.prefetch < 0:
		return usageError{fmt.Errorf("--prefetch %d: want ≥ 0", f.prefetch)}
	}
	metricsAddr, err := metricsListenAddr(f.metricsAddr)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return fmt.Errorf("command %q: %v", argv[0], errors.Unwrap(err))
	}
	level := slog.LevelInfo
	log := slog.New(slog.NewTextHandler(&lineWriter{w: a.stderr}, &slog.HandlerOptions{Level: level}))

	a.connLog = log
	c, err := a.connect(ctx, "work "+q, true)
	if err != nil {
		return err
	}
	defer c.Close()
	if most := maxResultFor(c.nc.MaxPayload()); int64(f.maxResult) > most {
		return usageError{fmt.Errorf("--max-result %d: the server's max_payload is %d bytes, so a job record holds a result of at most %d bytes (base64 in a JSON record, with 4 KiB for its other fields)",
			f.maxResult, c.nc.MaxPayload(), most)}
	}

	r := &commandRunner{argv: argv, queue: q, flags: f, stderr: a.stderr, log: log}
	opts := []consumer.Option{
		consumer.Concurrency(f.concurrency),
		consumer.AckWait(f.ackWait),
		consumer.MaxAttempts(f.maxAttempts),
		consumer.DrainTimeout(f.drainTimeout),
		consumer.Backoff(consumer.Exponential(f.backoff, f.backoffMax)),
		consumer.Logger(log),
		// Claim before the command starts: it gets its fencing token in the
		// environment, and a process costs far more than the one write saved by a
		// lazy claim.
		consumer.ClaimDelay(0),
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
	var reg *prometheus.Registry
	if metricsAddr != "" {
		reg = newRegistry()
		opts = append(opts, consumer.Metrics(reg))
	}
	octx, cancel := a.opCtx(ctx)
	opts = append(opts, f.groupCommit.worker())
	w, err := consumer.New(octx, c.js, q, r, opts...)
	cancel()
	if err != nil {
		if errors.Is(err, consumer.ErrIncompatible) {
			ictx, cancel := a.opCtx(ctx)
			defer cancel()
			if qi, ierr := admin.Info(ictx, c.js, q); ierr == nil && qi.Workers && time.Duration(qi.AckWait) != f.ackWait {
				return fmt.Errorf("queue %s: its workers use --ack-wait %s, this worker asked for %s; every worker of a queue must use the same ack wait (to change it, stop the workers and run 'workq queue set %s --ack-wait %s')",
					q, qi.AckWait, f.ackWait, q, f.ackWait)
			}
			return fmt.Errorf("queue %s: the workers' consumer has other settings: %v", q, strip(err))
		}
		return err
	}
	r.worker = w.Name()
	if reg != nil {
		ms, err := serveQueueMetrics(metricsAddr, reg, c.nc, c.js, []string{q}, w.Health)
		if err != nil {
			return err
		}
		defer ms.Close()
		log.Info("serving metrics", "url", "http://"+ms.addr+"/metrics", "health", "http://"+ms.addr+"/healthz")
	}
	log.Info("worker started", "queue", q, "worker", w.Name(), "server", c.url, "concurrency", f.concurrency, "ack_wait", f.ackWait)
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
	if runErr != nil {
		return runErr
	}
	return nil
}

// recordRoom is what a job record needs besides its result: ids, worker, times
// and the last error (this command's errors carry at most the last 200 characters
// of the command's stderr).
const recordRoom = 4 << 10

// maxResultFor is the largest result a job record holds on a server whose
// max_payload is maxPayload: the record is JSON with the result in base64.
func maxResultFor(maxPayload int64) int64 {
	return max(0, (maxPayload-recordRoom)*3/4)
}

// commandRunner is the consumer.Handler that runs the command for each job.
type commandRunner struct {
	argv   []string
	queue  string
	worker string
	flags  workFlags
	stderr io.Writer
	log    *slog.Logger
}

// Handle runs the command with the job on stdin and maps its exit to an outcome.
func (r *commandRunner) Handle(ctx context.Context, j *consumer.Job) error {
	start := time.Now()
	// Write the claim now (not lazily): the command gets its fencing token, and a
	// redelivery elsewhere fences this run out however short it is.
	token, err := j.FencingToken(ctx)
	if err != nil {
		return fmt.Errorf("job %s: not started: %w", j.ID(), err)
	}
	unpin := pinThread() // until the command is waited for: see command
	defer unpin()
	cmd, err := command(r.argv)
	if err != nil {
		return fmt.Errorf("start %s: %w", r.argv[0], err)
	}
	cmd.Stdin = bytes.NewReader(j.Payload())
	out := &limitedBuffer{max: r.flags.maxResult}
	cmd.Stdout = out
	tail := &tailBuffer{max: 4096}
	lw := &lineWriter{w: r.stderr}
	defer lw.flush()
	cmd.Stderr = io.MultiWriter(lw, tail)
	cmd.Env = append(os.Environ(), r.env(j, token)...)
	cmd.WaitDelay = r.flags.killGrace + time.Second // a grandchild holding stdout open cannot hang us
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", r.argv[0], err)
	}
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	killed := make(chan struct{})
	go func() {
		select {
		case <-exited:
			return
		case <-ctx.Done():
		}
		close(killed)
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(r.flags.killGrace):
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}()
	werr := cmd.Wait()
	close(exited)

	select {
	case <-killed:
		cause := context.Cause(ctx)
		r.logf(slog.LevelWarn, j, "command killed", "cause", cause)
		return fmt.Errorf("command killed: %w", cause)
	default:
	}
	if werr == nil {
		if out.over {
			return consumer.Permanent(fmt.Errorf("stdout exceeds --max-result %d bytes", r.flags.maxResult))
		}
		j.SetResult(out.Bytes())
		if r.flags.verbose {
			r.logf(slog.LevelInfo, j, "command succeeded; committing its result", "took", time.Since(start).Round(time.Millisecond))
		}
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) {
		return fmt.Errorf("command: %w", werr)
	}
	msg := exitText(ee)
	if last := tail.lastLine(); last != "" {
		msg += ": " + last
	}
	if ee.ExitCode() == r.flags.permanentExit {
		r.logf(slog.LevelWarn, j, "job failed permanently", "exit", ee.ExitCode())
		return consumer.Permanent(errors.New(msg))
	}
	if j.Attempt() < j.MaxAttempts() {
		r.logf(slog.LevelInfo, j, "job failed; will retry", "err", msg)
	}
	return errors.New(msg)
}

func (r *commandRunner) logf(level slog.Level, j *consumer.Job, msg string, args ...any) {
	args = append([]any{"job", j.ID(), "attempt", j.Attempt()}, args...)
	r.log.Log(context.Background(), level, msg, args...)
}

func exitText(ee *exec.ExitError) string {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "command killed by signal " + ws.Signal().String()
	}
	return "command exited with status " + strconv.Itoa(ee.ExitCode())
}

// env is the job's environment for the command.
func (r *commandRunner) env(j *consumer.Job, token uint64) []string {
	env := []string{
		"WORKQ_QUEUE=" + r.queue,
		"WORKQ_JOB_ID=" + j.ID(),
		"WORKQ_JOB_KIND=" + j.Kind(),
		"WORKQ_ATTEMPT=" + strconv.Itoa(j.Attempt()),
		"WORKQ_MAX_ATTEMPTS=" + strconv.Itoa(j.MaxAttempts()),
		"WORKQ_FENCING_TOKEN=" + strconv.FormatUint(token, 10),
		"WORKQ_JOB_SEQUENCE=" + strconv.FormatUint(j.Sequence(), 10),
		"WORKQ_WORKER=" + r.worker,
	}
	for k, vs := range j.Header() {
		if len(vs) == 0 || k == "Nats-Msg-Id" {
			continue
		}
		name := strings.ToUpper(strings.Map(func(c rune) rune {
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
				return c
			}
			return '_'
		}, k))
		env = append(env, "WORKQ_HEADER_"+name+"="+strings.Join(vs, ","))
	}
	return env
}

// limitedBuffer keeps up to max bytes and notes that more came.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// lastLine is the last non-empty line, trimmed to 200 characters.
func (t *tailBuffer) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	return truncate(strings.TrimSpace(lines[len(lines)-1]), 200)
}

// lineWriter writes whole lines atomically to w, so the output of concurrent
// commands and log lines does not interleave mid-line.
type lineWriter struct {
	w   io.Writer
	buf []byte
}

var outputMu sync.Mutex

func (l *lineWriter) Write(p []byte) (int, error) {
	outputMu.Lock()
	defer outputMu.Unlock()
	l.buf = append(l.buf, p...)
	if i := bytes.LastIndexByte(l.buf, '\n'); i >= 0 {
		_, err := l.w.Write(l.buf[:i+1])
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
		if err != nil {
			return len(p), nil // stderr gone: do not fail the job for it
		}
	}
	if len(l.buf) > 64<<10 {
		_, _ = l.w.Write(l.buf)
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

// flush writes what is left of a last line without a newline.
func (l *lineWriter) flush() {
	outputMu.Lock()
	defer outputMu.Unlock()
	if len(l.buf) > 0 {
		_, _ = l.w.Write(append(l.buf, '\n'))
		l.buf = l.buf[:0]
	}
}
