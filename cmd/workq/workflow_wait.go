package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// workflowWaitFlags is `workq workflow wait`: the queue, the workflow id and the
// flags.
type workflowWaitFlags struct {
	queue, id string
	jsonOut   bool
	timeout   time.Duration
}

func (a *app) workflowWaitCommand() *cobra.Command {
	f := &workflowWaitFlags{}
	cmd := &cobra.Command{
		Use:   "wait <queue> <id>",
		Short: "Wait until every task of a workflow has ended, then show it",
		Long: `Wait until every task of a workflow has ended, through a watch of its tasks'
records, and show the workflow as workflow get does. The exit status is 0 for a
workflow done (every task committed), 1 for one failed (some task ended dead or
cancelled) or an unknown id, so that a script can go on only after a workflow
succeeded.`,
		Example: `  workq workflow wait orders order-42
  workq workflow wait orders order-42 --timeout 10m --json`,
		Args:              exactArgs(2, "<queue> <id>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.id = args[0], args[1]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print the workflow and its tasks' records as JSON, as workflow get --json does")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "wait at most this long (default: as long as it takes)")
	return cmd
}

func (f *workflowWaitFlags) validate() error {
	if f.timeout < 0 {
		return fmt.Errorf("--timeout %s: want a positive duration", f.timeout)
	}
	return nil
}

// run waits for the workflow's end, shows it, and fails unless it ended done.
func (f *workflowWaitFlags) run(ctx context.Context, a *app) error {
	c, err := a.connect(ctx, "workflow wait", false)
	if err != nil {
		return err
	}
	defer c.Close()
	var s *admin.WorkflowStatus
	err = waitEnd(ctx, f.queue, "workflow "+f.id, f.timeout, func(ctx context.Context) error {
		var err error
		s, err = c.admin.WaitWorkflow(ctx, f.queue, f.id)
		return err
	})
	if err != nil {
		return err
	}
	if err := writeWorkflow(a.stdout, f.queue, s, f.jsonOut); err != nil {
		return err
	}
	if s.State != producer.WorkflowDone {
		return exitCodeError{code: exitError, msg: fmt.Sprintf("queue %s: workflow %s ended %s: %s", f.queue, f.id, s.State, taskCounts(s.Counts))}
	}
	return nil
}
