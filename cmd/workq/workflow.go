package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

func (a *app) workflowCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "List, look into, wait for and cancel workflows",
		Long: `A workflow is a set of tasks, each a job whose id is <workflow>.<task>, with
dependencies between them: a task waits until every task it depends on has
ended. A workflow is running while some task has not ended, done when every task
committed, failed when every task ended and some ended dead or cancelled. Its
state is read from its tasks' records, which expire after the queue's record TTL
(24h by default).`,
	}
	cmd.AddCommand(a.workflowLsCommand(), a.workflowGetCommand(), a.workflowWaitCommand(), a.workflowCancelCommand())
	return cmd
}

// workflowGetFlags is `workq workflow get`: the queue, the workflow id and the flags.
type workflowGetFlags struct {
	queue, id string
	jsonOut   bool
}

func (a *app) workflowGetCommand() *cobra.Command {
	f := &workflowGetFlags{}
	cmd := &cobra.Command{
		Use:   "get <queue> <id>",
		Short: "Show a workflow's state and its tasks, parents first",
		Long: `Show a workflow's state (running, done or failed), when it was enqueued and
finished, and one row per task, every task after the tasks it depends on: its
state (waiting while a parent has not ended), attempt, parents, the parents it
still waits for, the parents that ended dead or cancelled, and the first line of
its last error. 'workq job get <queue> <workflow>.<task>' shows a task's record.`,
		Example: `  workq workflow get orders order-42
  workq workflow get orders order-42 --json`,
		Args:              exactArgs(2, "<queue> <id>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.id = args[0], args[1]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, `print {"id", "state", "counts", …, "tasks": [the tasks' records]}`)
	return cmd
}

func (f *workflowGetFlags) validate() error { return nil }

// run shows the workflow.
func (f *workflowGetFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "workflow get", func(ctx context.Context, c *conn) error {
		s, err := c.admin.Workflow(ctx, f.queue, f.id)
		if err != nil {
			return err
		}
		return writeWorkflow(a.stdout, f.queue, s, f.jsonOut)
	})
}

// workflowOutput is a workflow as --json prints it: the summary's fields with the
// record's key style, and the tasks' records.
type workflowOutput struct {
	ID         string                 `json:"id"`
	Queue      string                 `json:"queue"`
	State      admin.WorkflowState    `json:"state"`
	Counts     map[producer.State]int `json:"counts"`
	EnqueuedAt time.Time              `json:"enqueued_at,omitzero"`
	FinishedAt time.Time              `json:"finished_at,omitzero"`
	Tasks      []*admin.Record        `json:"tasks"`
}

// writeWorkflow prints a workflow as workflow get shows it: its fields, then a row
// per task in the order given (parents first); with jsonOut, as JSON.
func writeWorkflow(w io.Writer, queue string, s *admin.WorkflowStatus, jsonOut bool) error {
	if jsonOut {
		return writeJSON(w, workflowOutput{ID: s.ID, Queue: queue, State: s.State, Counts: s.Counts,
			EnqueuedAt: s.EnqueuedAt, FinishedAt: s.FinishedAt, Tasks: s.Tasks})
	}
	fields := []field{
		{"id", s.ID},
		{"queue", queue},
		{"state", string(s.State)},
		{"tasks", fmt.Sprintf("%d: %s", len(s.Tasks), taskCounts(s.Counts))},
		{"enqueued", instant(s.EnqueuedAt)},
		{"finished", instant(s.FinishedAt)},
	}
	if err := writeFields(w, fields); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t := newTable(w, "TASK", "STATE", "ATTEMPT", "PARENTS", "WAITING FOR", "FAILED PARENTS", "ERROR")
	for _, r := range s.Tasks {
		attempt := fmt.Sprint(r.Attempt)
		if r.MaxAttempts > 0 {
			attempt += fmt.Sprintf("/%d", r.MaxAttempts)
		}
		errLine, _, _ := strings.Cut(r.LastError, "\n")
		t.row(r.Task, r.State, attempt, taskList(r.Parents), taskList(r.WaitingFor), taskList(r.FailedParents), dash(truncate(errLine, 60)))
	}
	return t.flush()
}

// taskCounts says how many tasks are in each state, in the order a job goes
// through them: "1 waiting, 1 running, 2 done".
func taskCounts(counts map[producer.State]int) string {
	var parts []string
	for _, st := range producer.States {
		if n := counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// taskList shows task names as one cell: "a,b", or "-" for none.
func taskList(tasks []string) string { return dash(strings.Join(tasks, ",")) }
