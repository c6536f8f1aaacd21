package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// workflowLsFlags is `workq workflow ls`: the queue and the flags.
type workflowLsFlags struct {
	queue   string
	jsonOut bool
}

func (a *app) workflowLsCommand() *cobra.Command {
	f := &workflowLsFlags{}
	cmd := &cobra.Command{
		Use:     "ls <queue>",
		Aliases: []string{"list"},
		Short:   "List a queue's workflows, newest first, with their tasks' states",
		Long: `List a queue's workflows, newest first (by when they were enqueued): each one's
state (running, done or failed), its number of tasks and how many are in each
state, when it was enqueued and finished. It reads every job record of the queue,
as 'workq job ls' does; workflows are listed while their tasks' records last (the
queue's record TTL, 24h by default).`,
		Example: `  workq workflow ls orders
  workq workflow ls orders --json`,
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue = args[0]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, `print a JSON array: each workflow's "id", "state", "tasks", "counts" (tasks per state), "enqueued_at", "finished_at"`)
	return cmd
}

func (f *workflowLsFlags) validate() error { return nil }

// workflowSummaryOutput is a listed workflow as --json prints it.
type workflowSummaryOutput struct {
	ID         string                 `json:"id"`
	State      admin.WorkflowState    `json:"state"`
	Tasks      int                    `json:"tasks"`
	Counts     map[producer.State]int `json:"counts"`
	EnqueuedAt time.Time              `json:"enqueued_at,omitzero"`
	FinishedAt time.Time              `json:"finished_at,omitzero"`
}

// run lists the queue's workflows.
func (f *workflowLsFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "workflow ls", func(ctx context.Context, c *conn) error {
		list, err := c.admin.Workflows(ctx, f.queue)
		if err != nil {
			return err
		}
		if f.jsonOut {
			out := make([]workflowSummaryOutput, 0, len(list))
			for _, s := range list {
				out = append(out, workflowSummaryOutput{ID: s.ID, State: s.State, Tasks: s.Tasks, Counts: s.Counts,
					EnqueuedAt: s.EnqueuedAt, FinishedAt: s.FinishedAt})
			}
			return writeJSON(a.stdout, out)
		}
		if len(list) == 0 {
			fmt.Fprintf(a.stdout, "no workflows in %s\n", f.queue)
			return nil
		}
		t := newTable(a.stdout, "ID", "STATE", "TASKS", "PROGRESS", "ENQUEUED", "FINISHED")
		for _, s := range list {
			t.row(s.ID, string(s.State), s.Tasks, taskCounts(s.Counts), ago(s.EnqueuedAt), ago(s.FinishedAt))
		}
		return t.flush()
	})
}
