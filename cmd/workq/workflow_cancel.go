package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/workq/workq/producer"
)

// workflowCancelFlags is `workq workflow cancel`: the queue and the workflow id.
type workflowCancelFlags struct {
	queue, id string
}

func (a *app) workflowCancelCommand() *cobra.Command {
	f := &workflowCancelFlags{}
	return &cobra.Command{
		Use:   "cancel <queue> <id>",
		Short: "Cancel every task of a workflow that has not ended",
		Long: `Cancel every task of a workflow that has not ended, as 'workq job cancel' cancels
a job: a waiting or queued task never runs, a running task's handler is cancelled
at its worker's next heartbeat and neither committed nor retried. Tasks that have
ended keep their result. The workflow ends failed. A workflow that has ended
already (done or failed) or an unknown id is not cancelled: the command says why
and exits 1.`,
		Example:           `  workq workflow cancel orders order-42`,
		Args:              exactArgs(2, "<queue> <id>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.id = args[0], args[1]
			return a.execute(cmd.Context(), f)
		},
	}
}

func (f *workflowCancelFlags) validate() error { return nil }

// run cancels the workflow's tasks and says how many it cancelled.
func (f *workflowCancelFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "workflow cancel", func(ctx context.Context, c *conn) error {
		before, err := c.admin.Workflow(ctx, f.queue, f.id)
		if err != nil {
			return err
		}
		if before.State != producer.WorkflowRunning {
			return exitCodeError{code: exitError, msg: fmt.Sprintf("queue %s: workflow %s not cancelled: it has ended %s (%s)",
				f.queue, f.id, before.State, taskCounts(before.Counts))}
		}
		after, err := c.admin.CancelWorkflow(ctx, f.queue, f.id)
		if err != nil {
			return err
		}
		n := after.Counts[producer.StateCancelled] - before.Counts[producer.StateCancelled]
		fmt.Fprintf(a.stdout, "%s: cancelled %d of %d task(s); now %s: %s\n", f.id, n, len(after.Tasks), after.State, taskCounts(after.Counts))
		return nil
	})
}
