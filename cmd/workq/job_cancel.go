package main

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/admin"
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
		Short: "Cancel delayed jobs before they start",
		Long: `Cancel delayed jobs (enqueued with --at or --in) that have not fired yet: their
schedules are removed and their records say cancelled, so they never run — also
when the server fires one as it is cancelled. Cancelling a job cancelled already
says so again. A job that is not scheduled (queued, running, done…) or unknown is
not cancelled: the command says why and exits 1.`,
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
		if err := admin.Exists(ctx, c.js, f.queue); err != nil {
			return err
		}
		p, err := producer.New(ctx, c.js, f.queue)
		if err != nil {
			return err
		}
		failed := 0
		for _, id := range f.ids {
			rec, err := p.Cancel(ctx, id)
			switch {
			case err == nil:
				fmt.Fprintf(a.stdout, "%s: cancelled (was due %s)\n", id, rec.ScheduledAt.Local().Format("2006-01-02T15:04:05Z07:00"))
			case errors.Is(err, producer.ErrNotScheduled), errors.Is(err, producer.ErrNotFound), errors.Is(err, producer.ErrInvalidName):
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
