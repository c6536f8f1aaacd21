package admin

import (
	"context"

	"github.com/workq/workq/internal/workflow"
	"github.com/workq/workq/producer"
)

// WorkflowStatus is a workflow's state and every task's record, parents before
// their dependents: the producer's, read from the tasks' job records.
type WorkflowStatus = producer.WorkflowStatus

// WorkflowSummary is one workflow as Workflows lists it: its state and how many of
// its tasks are in each state, without the records.
type WorkflowSummary = producer.WorkflowSummary

// WorkflowState is where a workflow stands, from its tasks' states: running, done
// or failed (the producer's).
type WorkflowState = producer.WorkflowState

// Workflow returns the state of workflow id on queue name: running, done or failed,
// with every task's record, parents first. A workflow with no task recorded is
// ErrNotFound (never enqueued, or its records expired). It is producer.Workflow
// (one watch of the tasks' records), without creating the queue.
func (a *Admin) Workflow(ctx context.Context, name, id string) (*WorkflowStatus, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.Workflow(ctx, id)
}

// Workflows lists the workflows of queue name whose tasks are recorded, newest
// first, each with its state and its tasks' count per state. It reads every job
// record of the queue, as Jobs does. It is producer.Workflows, without creating the
// queue.
func (a *Admin) Workflows(ctx context.Context, name string) ([]WorkflowSummary, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.Workflows(ctx)
}

// CancelWorkflow cancels every task of workflow id on queue name that has not ended
// — a waiting task never runs, a running task's handler is stopped at its worker's
// next heartbeat, as CancelJob does — and returns the workflow's state after. A
// workflow that had ended already is returned as it stands, nothing cancelled; an
// unknown id is ErrNotFound. It is producer.CancelWorkflow, without creating the
// queue.
func (a *Admin) CancelWorkflow(ctx context.Context, name, id string) (*WorkflowStatus, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.CancelWorkflow(ctx, id)
}

// WaitWorkflow waits until every task of workflow id on queue name has ended and
// returns the workflow's final state, done or failed. It is producer.WaitWorkflow (a
// watch of the tasks' records, no polling), without creating the queue: an unknown
// id is ErrNotFound at once.
func (a *Admin) WaitWorkflow(ctx context.Context, name, id string) (*WorkflowStatus, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.WaitWorkflow(ctx, id)
}

// TaskID is the job id of task in workflow id: id + "." + task, the key of the
// task's record, for a link from a task to its parents and dependents (whose
// records name them by task).
func TaskID(id, task string) string { return workflow.TaskID(id, task) }
