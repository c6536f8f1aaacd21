package main

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// jobCancelFlags is `workq job cancel`: the queue and the job ids.
type jobCancelFlags struct {
	queue string
	ids   []string
}

func (a *app) jobCancelCommand() *cobra.Command {
	f := &jobCancelFlags{}
	return &cobra.Command{
		Use:   "cancel <queue> <id>...",
		Short: "Cancel jobs: scheduled, queued, retrying or running",
		Long: `Cancel jobs wherever they stand. Each job's record says cancelled from then on:
a scheduled (delayed) job's schedule is removed and a queued or retrying job's
message is removed, and it never runs (again) — also when a worker has it already;
a running job's handler is cancelled at its worker's next heartbeat (a third of the
ack wait), with a cause matching consumer.ErrCancelled, and it is neither committed
nor retried. Cancelling a job cancelled already says so again. A finished (done or
dead) or unknown job is not cancelled: the command says why and exits 1.`,
		Example:           `  workq job cancel reminders remind-ann remind-bob`,
		Args:              rangeArgs(2, math.MaxInt, "<queue> <id>..."),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.ids = args[0], args[1:]
			return a.execute(cmd.Context(), f)
		},
	}
}

func (f *jobCancelFlags) validate() error { return nil }

// run cancels each job and says what became of it.
func (f *jobCancelFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "job cancel", func(ctx context.Context, c *conn) error {
		if err := c.admin.Exists(ctx, f.queue); err != nil {
			return err
		}
		failed := 0
		for _, id := range f.ids {
			rec, err := c.admin.CancelJob(ctx, f.queue, id)
			switch {
			case err == nil:
				fmt.Fprintf(a.stdout, "%s: cancelled%s\n", id, cancelledWhen(rec))
			case errors.Is(err, admin.ErrFinished), errors.Is(err, admin.ErrNotFound), errors.Is(err, producer.ErrInvalidName):
				failed++
				fmt.Fprintf(a.stdout, "%s: not cancelled: %v\n", id, strip(err))
			default:
				return err
			}
		}
		if failed > 0 {
			return exitCodeError{code: exitError, msg: fmt.Sprintf("%d of %d jobs not cancelled", failed, len(f.ids))}
		}
		return nil
	})
}

// cancelledWhen says where a cancelled job stood: its due time if it was delayed, its
// attempt if it had run.
func cancelledWhen(rec *admin.Record) string {
	switch {
	case rec.Attempt > 0:
		return fmt.Sprintf(" (after attempt %d)", rec.Attempt)
	case !rec.ScheduledAt.IsZero():
		return fmt.Sprintf(" (was due %s)", rec.ScheduledAt.Local().Format("2006-01-02T15:04:05Z07:00"))
	}
	return " (was queued)"
}
