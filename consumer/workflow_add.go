package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/groupcommit"
	"github.com/workq/workq/internal/jobid"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/workflow"
)

// Run-time fan-out: a running task adds tasks to its workflow (Job.AddTasks), stored
// with its commit in one atomic batch of the records bucket — its done record, the
// new tasks' records and its dependents', which wait for the new tasks too — so the
// addition and the commit take effect together or not at all. A new task keeps its
// message in its record, as every waiting task does: a refused batch leaves nothing.

// NewTask is a task that a running workflow task adds to its workflow
// (Job.AddTasks). The task adding it is always one of its parents.
type NewTask struct {
	// Name is the task's name in the workflow: new in it, 1 to 64 letters, digits,
	// '_' and '-'.
	Name string
	// Kind routes it to a handler (Mux), as producer.Job.Kind.
	Kind string
	// Payload is its data.
	Payload []byte
	// Header are extra headers, passed to its handler.
	Header nats.Header
	// MaxAttempts overrides the worker's attempt limit when > 0.
	MaxAttempts int
	// DependsOn names other tasks added by the same run that it waits for too.
	DependsOn []string
	// RunIfParentFailed runs it even when one of those ends dead or cancelled
	// (producer.RunIfParentFailed).
	RunIfParentFailed bool
}

// ErrAddTasks is returned by Job.AddTasks for tasks it cannot add: the job is no
// workflow's task or runs unfenced, a bad or repeated name, a DependsOn that names
// no task added by this run, a cycle, too many tasks for one atomic commit, or a
// task too large for a message. The error says which.
var ErrAddTasks = errors.New("cannot add tasks")

// AddTasks adds tasks to the job's workflow, to start once the job has committed
// (and once the added tasks they depend on have); the job's dependents wait for them
// too. They are stored with the job's commit, in one atomic write: if the run does
// not commit (it fails and is retried, loses its claim, is cancelled), nothing is
// added, and a retry adds what its own run adds. Calls add up; the checks that do
// not need the server are made here. A name that turns out to exist in the workflow
// fails the commit for good: the job is dead-lettered.
func (j *Job) AddTasks(tasks ...NewTask) error {
	t := j.task()
	if !j.fenced || t == nil || t.Workflow == "" {
		return fmt.Errorf("job %s: %w: it is not a workflow's task", j.id, ErrAddTasks)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	added := append(slices.Clone(j.added), tasks...)
	if n := len(added) + len(t.Dependents) + 1; n > groupcommit.MaxAtomic {
		return fmt.Errorf("job %s: %w: %d tasks and %d dependents do not fit one atomic commit (at most %d writes)",
			j.id, ErrAddTasks, len(added), len(t.Dependents), groupcommit.MaxAtomic)
	}
	nodes := make([]workflow.Node, len(added))
	for i, a := range added {
		if a.Name == t.Task || slices.Contains(t.Dependents, a.Name) || slices.Contains(t.Parents, a.Name) {
			return fmt.Errorf("job %s: %w: task %q exists in workflow %s", j.id, ErrAddTasks, a.Name, t.Workflow)
		}
		if a.MaxAttempts < 0 || len(a.Kind) > queue.MaxKindLen {
			return fmt.Errorf("job %s: %w: task %q: a negative MaxAttempts or a kind longer than %d bytes", j.id, ErrAddTasks, a.Name, queue.MaxKindLen)
		}
		nodes[i] = workflow.Node{Name: a.Name, Parents: a.DependsOn}
		size := queue.MsgSize(a.Header, a.Payload) + 512 // and workq's headers
		if max := j.w.js.Conn().MaxPayload(); int64(size+queue.DeadLetterReserve) > max {
			return fmt.Errorf("job %s: %w: task %q of %d bytes does not fit the server's max payload (%d) less %d kept for its dead letter",
				j.id, ErrAddTasks, a.Name, size, max, queue.DeadLetterReserve)
		}
	}
	if _, err := workflow.Check(nodes); err != nil {
		return fmt.Errorf("job %s: %w: %w", j.id, ErrAddTasks, err)
	}
	for _, a := range j.w.planAdded(added, t) {
		if err := workflow.CheckRecordSize(a, j.w.js.Conn().MaxPayload()); err != nil {
			return fmt.Errorf("job %s: %w: %w", j.id, ErrAddTasks, err)
		}
	}
	j.added = added
	return nil
}

// planAdded builds the records of the tasks added, by the run of parent (its claim),
// each keeping its message; their dependents are parent's dependents, which wait
// for them too.
func (w *Worker) planAdded(added []NewTask, parent *record.Record) []*record.Record {
	now := time.Now()
	out := make([]*record.Record, len(added))
	for i, a := range added {
		id := workflow.TaskID(parent.Workflow, a.Name)
		parents := append([]string{parent.Task}, a.DependsOn...)
		var deps []string
		for _, b := range added {
			if slices.Contains(b.DependsOn, a.Name) {
				deps = append(deps, b.Name)
			}
		}
		enqueue := jobid.New()
		h := make(nats.Header, len(a.Header)+4)
		for k, v := range a.Header {
			h[k] = v
		}
		h.Set(queue.HeaderEnqueue, enqueue)
		h.Set(queue.HeaderWorkflow, parent.Workflow)
		if a.Kind != "" {
			h.Set(queue.HeaderKind, a.Kind)
		}
		if a.MaxAttempts > 0 {
			h.Set(queue.HeaderMaxAttempts, fmt.Sprint(a.MaxAttempts))
		}
		out[i] = &record.Record{
			ID: id, Queue: w.names.Queue, Kind: a.Kind, State: record.Waiting, MaxAttempts: a.MaxAttempts,
			Enqueue: enqueue, EnqueuedAt: now, Workflow: parent.Workflow, Task: a.Name,
			Parents: parents, WaitingFor: slices.Clone(parents), Dependents: append(deps, parent.Dependents...),
			RunIfFailed: a.RunIfParentFailed,
			Message:     &record.Message{Subject: w.names.JobSubject(id), Header: h, Data: a.Payload},
		}
	}
	return out
}

// commitWithTasks writes j's commit with the tasks its run added (writeOutcome): one
// atomic batch of j's done record (over its claim), the new records and its
// dependents' records (each over the revision read), read again and sent again while
// only a dependent's revision moved (another parent told it). errTaskExists: an added
// task's name exists (the job dies); record.ErrConflict: the claim was lost.
func (w *Worker) commitWithTasks(ctx context.Context, j *Job) error {
	ctx, cancel := w.writeContext(ctx)
	defer cancel()
	return w.commitAdded(ctx, j, w.planAdded(j.added, j.task()))
}

// errTaskExists is the cause of a commit whose added task's name exists in the
// workflow.
var errTaskExists = errors.New("added task exists in the workflow")

// commitAdded writes the atomic batch of commitWithTasks, holding j's claim (no
// renewal moves it meanwhile). It returns record.ErrConflict when the claim was lost,
// errTaskExists when an added task's name exists, and any other error when the
// outcome is unknown.
func (w *Worker) commitAdded(ctx context.Context, j *Job, plan []*record.Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lost {
		return fmt.Errorf("%w: job %s", record.ErrConflict, j.id)
	}
	claim := j.claim
	done := *claim
	j.applyProgress(&done)
	done.Run, done.State, done.Result, done.FinishedAt, done.RetryAt = j.run, record.Done, j.result, time.Now(), time.Time{}
	for _, a := range plan {
		done.Dependents = append(slices.Clone(done.Dependents), a.Task)
	}
	var names []string
	for _, a := range plan {
		names = append(names, a.Task)
	}
	for range maxClaimRounds {
		msgs := make([]*nats.Msg, 0, 1+len(plan)+len(claim.Dependents))
		add := func(r *record.Record, prev uint64) error {
			m, err := w.records.WriteMsg(r, prev)
			msgs = append(msgs, m)
			return err
		}
		if err := add(&done, claim.Revision); err != nil {
			return err
		}
		for _, a := range plan {
			m, err := w.records.CreateMsg(ctx, a)
			if errors.Is(err, record.ErrConflict) {
				return fmt.Errorf("job %s: %w: task %s", j.id, errTaskExists, a.Task)
			}
			if err != nil {
				return err
			}
			msgs = append(msgs, m)
		}
		read := map[string]uint64{}
		for _, d := range claim.Dependents {
			id := workflow.TaskID(claim.Workflow, d)
			dep, err := w.records.Get(ctx, id)
			if errors.Is(err, record.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			read[id] = dep.Revision
			if dep.State != record.Waiting {
				continue // cancelled meanwhile: nothing left to wait
			}
			next := *dep
			next.Parents = append(slices.Clone(dep.Parents), names...)
			next.WaitingFor = append(slices.Clone(dep.WaitingFor), names...)
			if err := add(&next, dep.Revision); err != nil {
				return err
			}
		}
		seqs, err := groupcommit.Atomic(ctx, w.js, msgs)
		if err == nil {
			done.Revision = seqs[0]
			j.claim = &done
			return nil
		}
		cur, rerr := w.records.Get(ctx, j.id)
		switch {
		case rerr != nil:
			return errors.Join(err, rerr)
		case cur.Run == j.run && cur.State == record.Done && cur.Revision > claim.Revision:
			j.claim = cur // landed; its reply was lost
			return nil
		case cur.Revision != claim.Revision:
			j.loseLocked(w.lostCause(ctx, j))
			return fmt.Errorf("%w: job %s", record.ErrConflict, j.id)
		case !errors.Is(err, groupcommit.ErrRefused):
			return err
		}
		for _, a := range plan {
			if _, gerr := w.records.Get(ctx, a.ID); gerr == nil {
				return fmt.Errorf("job %s: %w: task %s", j.id, errTaskExists, a.Task)
			}
		}
		moved := false
		for _, d := range claim.Dependents {
			id := workflow.TaskID(claim.Workflow, d)
			if dep, gerr := w.records.Get(ctx, id); gerr == nil && dep.Revision != read[id] {
				moved = true
			}
		}
		if !moved {
			return err
		}
	}
	return fmt.Errorf("job %s: its dependents' records kept changing", j.id)
}
