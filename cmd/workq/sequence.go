package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
)

func (a *app) sequenceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sequence",
		Short: "List and look into sequences, and resume a halted one",
		Long: `A sequence is the jobs enqueued with one key (enqueue --sequence): they run one
at a time, across every worker, in the order they were enqueued. A job waits for
the one before it to end without taking a worker. A key whose job died halts at
the next job when that was enqueued with --halt-on-dead, until 'workq sequence
resume'; cancelling the halted job lets the key go on too.`,
	}
	cmd.AddCommand(a.sequenceLsCommand(), a.sequenceGetCommand(), a.sequenceResumeCommand())
	return cmd
}

// sequenceLsFlags is `workq sequence ls`.
type sequenceLsFlags struct {
	queue   string
	jsonOut bool
}

func (a *app) sequenceLsCommand() *cobra.Command {
	f := &sequenceLsFlags{}
	cmd := &cobra.Command{
		Use:     "ls <queue>",
		Aliases: []string{"list"},
		Short:   "List the sequence keys that have jobs not ended",
		Long: `List the queue's sequence keys that have jobs not ended, by key: the job running
(or queued, or retrying), how many jobs wait behind it and how long the oldest has
waited, and the job the key halted at (with the job before it, which died). It
reads every job record of the queue, as 'workq job ls' does.`,
		Example: `  workq sequence ls webhooks
  workq sequence ls webhooks --json`,
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue = args[0]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, `print a JSON array: each key's "key", "active", "waiting", "oldest_waiting", "halted", "halted_after"`)
	return cmd
}

func (f *sequenceLsFlags) validate() error { return nil }

// run lists the keys.
func (f *sequenceLsFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "sequence ls", func(ctx context.Context, c *conn) error {
		list, err := c.admin.Sequences(ctx, f.queue)
		if err != nil {
			return err
		}
		if f.jsonOut {
			return writeJSON(a.stdout, list)
		}
		if len(list) == 0 {
			fmt.Fprintf(a.stdout, "no sequence in %s has jobs not ended\n", f.queue)
			return nil
		}
		t := newTable(a.stdout, "KEY", "ACTIVE", "WAITING", "OLDEST WAITING", "HALTED AT", "AFTER DEAD")
		for _, s := range list {
			t.row(s.Key, dash(s.Active), s.Waiting, ago(s.OldestWaiting), dash(s.Halted), dash(s.HaltedAfter))
		}
		return t.flush()
	})
}

// sequenceGetFlags is `workq sequence get`.
type sequenceGetFlags struct {
	queue, key string
	jsonOut    bool
}

func (a *app) sequenceGetCommand() *cobra.Command {
	f := &sequenceGetFlags{}
	cmd := &cobra.Command{
		Use:   "get <queue> <key>",
		Short: "Show a sequence key's jobs that have not ended, in their order",
		Long: `Show where a sequence key stands (its active job, the jobs waiting behind it,
the job it halted at) and one row per job that has not ended, in the order they
run: its state, attempt, the job it waits for, and the first line of its last
error. 'workq job get <queue> <id>' shows a job's record.`,
		Example: `  workq sequence get webhooks customer-42
  workq sequence get webhooks customer-42 --json`,
		Args:              exactArgs(2, "<queue> <key>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.key = args[0], args[1]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, `print {"key", "active", "waiting", …, "jobs": [the jobs' records]}`)
	return cmd
}

func (f *sequenceGetFlags) validate() error { return nil }

// run shows the key.
func (f *sequenceGetFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "sequence get", func(ctx context.Context, c *conn) error {
		s, err := c.admin.Sequence(ctx, f.queue, f.key)
		if err != nil {
			return err
		}
		if f.jsonOut {
			return writeJSON(a.stdout, s)
		}
		state := "running"
		switch {
		case s.Halted != "":
			state = fmt.Sprintf("halted at %s (%s ended dead)", s.Halted, dash(s.HaltedAfter))
		case len(s.Jobs) == 0:
			state = "idle: no job of the key has not ended"
		}
		fields := []field{
			{"key", s.Key},
			{"queue", f.queue},
			{"state", state},
			{"active", dash(s.Active)},
			{"waiting", fmt.Sprintf("%d, the oldest enqueued %s", s.Waiting, ago(s.OldestWaiting))},
		}
		if err := writeFields(a.stdout, fields); err != nil || len(s.Jobs) == 0 {
			return err
		}
		fmt.Fprintln(a.stdout)
		t := newTable(a.stdout, "JOB", "STATE", "ATTEMPT", "AFTER", "ENQUEUED", "ERROR")
		for _, r := range s.Jobs {
			st := string(r.State)
			if r.Halted {
				st = "halted"
			}
			errLine, _, _ := strings.Cut(r.LastError, "\n")
			t.row(r.ID, st, r.Attempt, dash(r.After), ago(r.EnqueuedAt), dash(truncate(errLine, 60)))
		}
		return t.flush()
	})
}

// sequenceResumeFlags is `workq sequence resume`.
type sequenceResumeFlags struct {
	queue, key string
}

func (a *app) sequenceResumeCommand() *cobra.Command {
	f := &sequenceResumeFlags{}
	return &cobra.Command{
		Use:   "resume <queue> <key>",
		Short: "Resume a sequence key halted at a job whose predecessor died",
		Long: `Resume a sequence key that halted (its job died, and the next was enqueued with
--halt-on-dead): the job it halted at runs, and the key goes on. A key that is not
halted is left as it is: the command says so and exits 1. To skip the halted job
instead, cancel it ('workq job cancel').`,
		Example:           `  workq sequence resume webhooks customer-42`,
		Args:              exactArgs(2, "<queue> <key>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.key = args[0], args[1]
			return a.execute(cmd.Context(), f)
		},
	}
}

func (f *sequenceResumeFlags) validate() error { return nil }

// run resumes the key.
func (f *sequenceResumeFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "sequence resume", func(ctx context.Context, c *conn) error {
		r, err := c.admin.ResumeSequence(ctx, f.queue, f.key)
		if errors.Is(err, admin.ErrNotHalted) {
			return exitCodeError{code: exitError, msg: fmt.Sprintf("queue %s: sequence %s is not halted; nothing resumed", f.queue, f.key)}
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s: resumed at job %s (after %s, which died)\n", f.key, r.ID, dash(r.After))
		return nil
	})
}
