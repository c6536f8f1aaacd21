package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// queuePauseFlags is `workq queue pause` and `workq queue resume`: the queue, and
// which of the two.
type queuePauseFlags struct {
	queue  string
	resume bool
}

func (a *app) queuePauseCommand() *cobra.Command {
	return a.pauseCommand(false, &cobra.Command{
		Use:   "pause <queue>",
		Short: "Pause a queue: its workers get no jobs until it is resumed",
		Long: `Pause a queue on the server: its workers, wherever they run, get no more jobs
and stay connected and idle until 'workq queue resume'. Jobs running as it pauses
go on and commit. Enqueues still work, and delayed and periodic jobs fire into the
queue and wait there. The pause is kept on the server: it holds across worker and
server restarts. A queue no worker has run on yet cannot be paused.`,
		Example: `  workq queue pause emails`,
	})
}

func (a *app) queueResumeCommand() *cobra.Command {
	return a.pauseCommand(true, &cobra.Command{
		Use:     "resume <queue>",
		Short:   "Resume a paused queue",
		Long:    `Resume a paused queue: its waiting workers get jobs at once.`,
		Example: `  workq queue resume emails`,
	})
}

// pauseCommand completes the pause or resume command cmd.
func (a *app) pauseCommand(resume bool, cmd *cobra.Command) *cobra.Command {
	f := &queuePauseFlags{resume: resume}
	cmd.Args = exactArgs(1, "<queue>")
	cmd.ValidArgsFunction = a.completeQueues
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		f.queue = args[0]
		return a.execute(cmd.Context(), f)
	}
	return cmd
}

func (f *queuePauseFlags) validate() error { return nil }

// run pauses or resumes the queue.
func (f *queuePauseFlags) run(ctx context.Context, a *app) error {
	what := "queue pause"
	if f.resume {
		what = "queue resume"
	}
	return a.withConn(ctx, what, func(ctx context.Context, c *conn) error {
		if f.resume {
			if err := c.admin.ResumeQueue(ctx, f.queue); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "resumed queue %s\n", f.queue)
			return nil
		}
		if err := c.admin.PauseQueue(ctx, f.queue); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "paused queue %s: its workers get no jobs until 'workq queue resume %s'\n", f.queue, f.queue)
		return nil
	})
}
