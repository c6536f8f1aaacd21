package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// jobWaitFlags is `workq job wait`: the queue, the job id and the flags.
type jobWaitFlags struct {
	queue, id string
	jsonOut   bool
	timeout   time.Duration
}

func (a *app) jobWaitCommand() *cobra.Command {
	f := &jobWaitFlags{}
	cmd := &cobra.Command{
		Use:   "wait <queue> <id>",
		Short: "Wait until a job has ended, then show its record",
		Long: `Wait until a job has ended (done, dead or cancelled), through a watch of its
record, and show the record as job get does. A job that retries is waited for
through its retries. The exit status is 0 for a job done, 1 for one dead or
cancelled (or an unknown id), so that a script can go on only after a job
succeeded.`,
		Example: `  workq job wait emails welcome-ann
  workq job wait reports report-mon --timeout 10m --json`,
		Args:              exactArgs(2, "<queue> <id>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.id = args[0], args[1]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print the job record as JSON (result in base64)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "wait at most this long (default: as long as it takes)")
	return cmd
}

func (f *jobWaitFlags) validate() error {
	if f.timeout < 0 {
		return fmt.Errorf("--timeout %s: want a positive duration", f.timeout)
	}
	return nil
}

// run waits for the job's end and shows its record.
func (f *jobWaitFlags) run(ctx context.Context, a *app) error {
	c, err := a.connect(ctx, "job wait", false)
	if err != nil {
		return err
	}
	defer c.Close()
	wait := func(ctx context.Context, id string) (*admin.Record, error) { return c.admin.WaitJob(ctx, f.queue, id) }
	return awaitJob(ctx, a, f.queue, f.id, f.timeout, f.jsonOut, wait)
}

// awaitJob waits with wait, at most timeout (0: no limit), until job id on queue has
// ended, prints its record, and fails with exit status 1 unless it ended done: `job
// wait` and `enqueue --await`.
func awaitJob(ctx context.Context, a *app, queue, id string, timeout time.Duration, jsonOut bool,
	wait func(context.Context, string) (*admin.Record, error)) error {
	var rec *admin.Record
	err := waitEnd(ctx, queue, "job "+id, timeout, func(ctx context.Context) error {
		var err error
		rec, err = wait(ctx, id)
		return err
	})
	if err != nil {
		return err
	}
	if err := writeRecord(a.stdout, rec, jsonOut); err != nil {
		return err
	}
	if rec.State != producer.StateDone {
		return exitCodeError{code: exitError, msg: fmt.Sprintf("queue %s: job %s ended %s", queue, id, rec.State)}
	}
	return nil
}

// waitEnd runs wait, at most timeout (0: no limit), and turns its end by the
// timeout or by a signal into the command's exit (status 1, one line naming what
// was waited for on queue: "job a1", "workflow order-42"): `job wait`, `enqueue
// --await` and `workflow wait`.
func waitEnd(ctx context.Context, queue, what string, timeout time.Duration, wait func(context.Context) error) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	err := wait(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && timeout > 0:
		return exitCodeError{code: exitError, msg: fmt.Sprintf("queue %s: %s had not ended after %s", queue, what, timeout)}
	case errors.Is(err, context.Canceled):
		return exitCodeError{code: exitError, msg: fmt.Sprintf("queue %s: interrupted while waiting for %s", queue, what)}
	}
	return err
}
