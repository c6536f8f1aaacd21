package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/workq/workq/cmd/workq/internal/proc"
	"github.com/workq/workq/consumer"
)

// commandRunner is the consumer.Handler that runs the command for each job.
type commandRunner struct {
	argv    []string
	queue   string
	worker  string
	flags   *workFlags
	stderr  io.Writer
	log     *slog.Logger
	tracing *tracing // --otel, else nil
}

// Handle runs the command with the job on stdin and maps its exit to an outcome.
func (r *commandRunner) Handle(ctx context.Context, j *consumer.Job) error {
	start := time.Now()
	// The command gets its fencing token: the claim's revision, written before the
	// handler started.
	token, err := j.FencingToken(ctx)
	if err != nil {
		return fmt.Errorf("job %s: not started: %w", j.ID(), err)
	}
	cmd, err := proc.Command(r.argv)
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
	cmd.Env = append(append(os.Environ(), r.env(j, token)...), r.tracing.env(ctx)...)
	cmd.WaitDelay = r.flags.killGrace + time.Second // a grandchild holding stdout open cannot hang us
	// ctx ends on --timeout, a lost job or a drain that ran out: the command's group
	// is killed.
	exit, err := proc.Run(cmd, proc.Ends{Stop: ctx.Done(), Grace: r.flags.killGrace})
	if err != nil {
		return fmt.Errorf("start %s: %w", r.argv[0], err)
	}
	if exit.Stopped {
		cause := context.Cause(ctx)
		r.logf(slog.LevelWarn, j, "command killed", "cause", cause)
		return fmt.Errorf("command killed: %w", cause)
	}
	if exit.Err == nil {
		if out.over {
			return consumer.Permanent(fmt.Errorf("stdout exceeds --max-result %d bytes", r.flags.maxResult))
		}
		j.SetResult(out.Bytes())
		if r.flags.verbose {
			r.logf(slog.LevelInfo, j, "command succeeded; committing its result", "took", time.Since(start).Round(time.Millisecond))
		}
		return nil
	}
	status, signaled, ok := exit.Status()
	if !ok {
		return fmt.Errorf("command: %w", exit.Err)
	}
	msg := exit.String()
	if last := tail.lastLine(); last != "" {
		msg += ": " + last
	}
	if !signaled && status == r.flags.permanentExit {
		r.logf(slog.LevelWarn, j, "job failed permanently", "exit", status)
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
