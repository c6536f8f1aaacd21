package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/workflow"
)

// A workflow's tasks (docs/workflows.md). A task's record names its workflow, its
// parents and its dependents; the worker that ends a task — commits, dead-letters or
// drops it cancelled — tells its dependents before it acks or terminates the
// message. A worker that dies in between leaves the message in the queue: its next
// delivery finds the record ended and tells them then (telling twice changes
// nothing), so no dependent waits for ever and none is released twice.

// ErrParentFailed is returned by Job.ParentResult for a parent task that ended dead
// or cancelled: it has no result.
var ErrParentFailed = errors.New("parent task did not succeed")

// ErrNotParent is returned by Job.ParentResult for a name that is not one of the
// job's parent tasks (or a job that is no workflow's task).
var ErrNotParent = errors.New("not a parent task of this job")

// tellDependents tells the dependents of task rec, which ended (or the next job of
// sequence job rec), before the delivery is acked or terminated. It reports whether
// they were told; when not (a server error), the delivery is put back (execute): its
// next delivery finds the record ended and tells them then.
func (w *Worker) tellDependents(ctx context.Context, j *Job, rec *record.Record) bool {
	if rec == nil || (rec.Workflow == "" || len(rec.Dependents) == 0) && rec.SequenceKey == "" {
		return true
	}
	wctx, cancel := w.writeContext(ctx)
	defer cancel()
	if err := w.flows.Ended(wctx, rec); err != nil {
		w.log.Warn(fmt.Sprintf("job %s: its dependent tasks were not all told that it ended; its next delivery tells them", j.id),
			"job", j.id, "workflow", rec.Workflow, "err", err)
		return false
	}
	return true
}

// carryTask copies the workflow and sequence fields of rec, the record a claim read,
// into next, the claim: a task keeps its place in its workflow across runs, a job its
// place in its sequence.
func carryTask(next, rec *record.Record) {
	next.Workflow, next.Task, next.Parents, next.Dependents = rec.Workflow, rec.Task, rec.Parents, rec.Dependents
	next.FailedParents, next.RunIfFailed = rec.FailedParents, rec.RunIfFailed
	next.SequenceKey, next.After, next.HaltDead = rec.SequenceKey, rec.After, rec.HaltDead
}

// task is the job's record as its claim wrote it; nil on an unfenced run.
func (j *Job) task() *record.Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.claim
}

// Workflow is the id of the workflow the job is a task of; "" for a job outside a
// workflow.
func (j *Job) Workflow() string {
	if t := j.task(); t != nil {
		return t.Workflow
	}
	return ""
}

// Task is the job's task name in its workflow; "" for a job outside a workflow.
func (j *Job) Task() string {
	if t := j.task(); t != nil {
		return t.Task
	}
	return ""
}

// Parents are the names of the tasks the job depended on, in the order they were
// given; all of them ended before it started. Nil for a job outside a workflow.
func (j *Job) Parents() []string {
	if t := j.task(); t != nil {
		return slices.Clone(t.Parents)
	}
	return nil
}

// FailedParents are the parents that ended dead or cancelled; a task runs with any
// only when it was enqueued with producer.RunIfParentFailed.
func (j *Job) FailedParents() []string {
	if t := j.task(); t != nil {
		return slices.Clone(t.FailedParents)
	}
	return nil
}

// ParentResult is the result parent task name committed (what its handler set with
// SetResult; nil if it set none). It is ErrParentFailed for a parent that ended dead
// or cancelled, ErrNotParent for a name that is not one of the job's parents.
func (j *Job) ParentResult(ctx context.Context, name string) ([]byte, error) {
	t := j.task()
	if t == nil || !slices.Contains(t.Parents, name) {
		return nil, fmt.Errorf("job %s: %q: %w", j.id, name, ErrNotParent)
	}
	rec, err := j.w.records.Get(ctx, workflow.TaskID(t.Workflow, name))
	switch {
	case errors.Is(err, record.ErrNotFound):
		return nil, fmt.Errorf("job %s: parent task %s has no record (it expired, or was removed): %w", j.id, name, err)
	case err != nil:
		return nil, fmt.Errorf("job %s: read parent task %s: %w", j.id, name, err)
	case rec.State != record.Done:
		return nil, fmt.Errorf("job %s: parent task %s is %s: %w", j.id, name, rec.State, ErrParentFailed)
	}
	return rec.Result, nil
}

// ParentResultAs decodes the JSON result of parent task name into a T (see
// Job.ParentResult).
func ParentResultAs[T any](ctx context.Context, j *Job, name string) (T, error) {
	var v T
	b, err := j.ParentResult(ctx, name)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("job %s: result of parent task %s: %w", j.id, name, err)
	}
	return v, nil
}
