package producer

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/wireid"
	"github.com/workq/workq/internal/workflow"
)

// WorkflowState is where a workflow stands, from its tasks' states.
type WorkflowState string

// The states of a workflow.
const (
	// WorkflowRunning: some task has not ended (it waits, is queued, runs or retries).
	WorkflowRunning WorkflowState = "running"
	// WorkflowDone: every task committed.
	WorkflowDone WorkflowState = "done"
	// WorkflowFailed: every task ended, and some ended dead or cancelled.
	WorkflowFailed WorkflowState = "failed"
)

// WorkflowStatus is a workflow's state: every task's record.
type WorkflowStatus struct {
	ID    string
	State WorkflowState
	// Tasks are the tasks' records, each after its parents; among those whose
	// parents are placed, by name.
	Tasks []*Record
	// Counts are the tasks per state.
	Counts map[State]int
	// EnqueuedAt is when the workflow was enqueued; FinishedAt when its last task
	// ended (zero while it runs).
	EnqueuedAt, FinishedAt time.Time
}

// Task returns the record of task name, nil if the workflow has none.
func (s *WorkflowStatus) Task(name string) *Record {
	for _, t := range s.Tasks {
		if t.Task == name {
			return t
		}
	}
	return nil
}

// Workflow returns the state of workflow id, read from its tasks' records (one
// watch of the keys id.*). A workflow with no task recorded is ErrNotFound (never
// enqueued, or its records expired).
func (p *Producer) Workflow(ctx context.Context, id string) (*WorkflowStatus, error) {
	if ctx == nil {
		return nil, fmt.Errorf("producer: workflow %s on queue %s: %w", id, p.names.Queue, option.Nil("context"))
	}
	s, err := p.workflow(ctx, id, false)
	if err != nil {
		return nil, fmt.Errorf("producer: workflow %s on queue %s: %w", id, p.names.Queue, err)
	}
	return s, nil
}

// WaitWorkflow waits until every task of workflow id has ended and returns the
// workflow's final state (done or failed), watching its tasks' records as Wait
// does: no polling. It ends with ctx's error when ctx ends first.
func (p *Producer) WaitWorkflow(ctx context.Context, id string) (*WorkflowStatus, error) {
	if ctx == nil {
		return nil, fmt.Errorf("producer: wait for workflow %s on queue %s: %w", id, p.names.Queue, option.Nil("context"))
	}
	s, err := p.workflow(ctx, id, true)
	if err != nil {
		return nil, fmt.Errorf("producer: wait for workflow %s on queue %s: %w", id, p.names.Queue, err)
	}
	return s, nil
}

// CancelWorkflow cancels every task of workflow id that has not ended (see Cancel:
// a running task's handler is stopped, a waiting one never runs) and returns the
// workflow's state after.
func (p *Producer) CancelWorkflow(ctx context.Context, id string) (*WorkflowStatus, error) {
	s, err := p.Workflow(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, t := range s.Tasks {
		if t.State.Terminal() {
			continue
		}
		if _, err := p.cancel(ctx, t.ID); err != nil && !errors.Is(err, ErrFinished) {
			return nil, fmt.Errorf("producer: cancel workflow %s on queue %s: task %s: %w", id, p.names.Queue, t.Task, err)
		}
	}
	return p.Workflow(ctx, id)
}

// workflow reads workflow id's tasks; with wait, it goes on watching until every
// task has ended.
func (p *Producer) workflow(ctx context.Context, id string, wait bool) (*WorkflowStatus, error) {
	if err := workflow.CheckName("workflow", id); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reconnected := p.reconnects()
	defer p.js.Conn().RemoveStatusListener(reconnected)
	keys := func() []string { return []string{wireid.Encode(id) + ".*"} } // a new slice each time: the watch rewrites it
	w, err := p.records.KV.WatchFiltered(ctx, keys())
	if err != nil {
		return nil, err
	}
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	tasks := map[string]*record.Record{}
	open := 0                                     // tasks whose records are not terminal: the workflow ended at 0
	current := false                              // the watch has sent every record there was
	completed := false                            // the records it left out of that were read
	set := func(key string, rec *record.Record) { // rec nil: removed
		if old := tasks[key]; old != nil && !old.State.Terminal() {
			open--
		}
		if rec == nil {
			delete(tasks, key)
			return
		}
		if !rec.State.Terminal() {
			open++
		}
		tasks[key] = rec
	}
	for {
		var e jetstream.KeyValueEntry
		var ok bool
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-reconnected:
		case e, ok = <-w.Updates():
		}
		if !ok && !p.js.Conn().IsClosed() {
			// Watched anew, as Wait does. Every task is known by now, and a record
			// the new watch leaves out of its first ones comes as an update.
			_ = w.Stop()
			if w, err = p.rewatch(ctx, func() (jetstream.KeyWatcher, error) { return p.records.KV.WatchFiltered(ctx, keys()) }); err != nil {
				return nil, err
			}
			current = false
			continue
		}
		switch {
		case !ok:
			return nil, errors.New("the watch of its records ended (connection closed)")
		case e == nil:
			current = true
		case e.Operation() != jetstream.KeyValuePut:
			set(e.Key(), nil)
		default:
			taskID, _ := wireid.Decode(e.Key())
			rec, err := record.Decode(taskID, e.Value(), e.Revision())
			if err != nil || rec.Workflow != id {
				continue // not a task of it: left out
			}
			if old := tasks[e.Key()]; old == nil || old.Revision < rec.Revision {
				set(e.Key(), rec)
			}
		}
		if !current {
			continue
		}
		if !completed {
			if err := p.completeWorkflow(ctx, id, tasks, set); err != nil {
				return nil, err
			}
			completed = true // what comes later comes as updates
		}
		if len(tasks) == 0 {
			return nil, fmt.Errorf("%w: no task of workflow %s is recorded", ErrNotFound, id)
		}
		if !wait || open == 0 {
			// Summed up once, at the end: a wait on a workflow of thousands of tasks
			// sees thousands of updates.
			return workflowStatus(id, tasks), nil
		}
	}
}

// completeWorkflow reads the tasks of workflow id whose keys the records stream
// holds and tasks lacks, adding them with set. A watch's "caught up" is not enough: a record rewritten
// while the watch starts can be left out of what it sends first, to come only later
// as an update (measured: reads of running diamonds lacked a task 44 times in 100).
// The stream's own index of the workflow's keys, read after the watch caught up,
// names every task recorded by then; later ones come as updates.
func (p *Producer) completeWorkflow(ctx context.Context, id string, tasks map[string]*record.Record, set func(string, *record.Record)) error {
	prefix := "$KV." + p.names.Bucket + "."
	var si *jetstream.StreamInfo
	// Tries of 2 s: right after a server restart, a first request can go unanswered.
	err := retry.DoEach(ctx, 2*time.Second, func(ctx context.Context) error {
		s, err := p.js.Stream(ctx, "KV_"+p.names.Bucket)
		if err == nil {
			si, err = s.Info(ctx, jetstream.WithSubjectFilter(prefix+wireid.Encode(id)+".*"))
		}
		return err
	})
	if err != nil {
		return err
	}
	for subject := range si.State.Subjects {
		key := strings.TrimPrefix(subject, prefix)
		if tasks[key] != nil {
			continue
		}
		taskID, _ := wireid.Decode(key)
		r, err := p.records.Get(ctx, taskID)
		switch {
		case errors.Is(err, record.ErrNotFound), errors.Is(err, record.ErrCorrupt):
		case err != nil:
			return err
		case r.Workflow == id:
			set(key, r)
		}
	}
	return nil
}

// workflowStatus sums up the records of a workflow's tasks.
func workflowStatus(id string, tasks map[string]*record.Record) *WorkflowStatus {
	s := &WorkflowStatus{ID: id, State: WorkflowDone, Counts: map[State]int{}}
	for _, r := range tasks {
		pr := publicRecord(r)
		s.Tasks = append(s.Tasks, pr)
		s.Counts[pr.State]++
		switch {
		case !pr.State.Terminal():
			s.State = WorkflowRunning
		case pr.State != StateDone && s.State == WorkflowDone:
			s.State = WorkflowFailed
		}
		if s.EnqueuedAt.IsZero() || pr.EnqueuedAt.Before(s.EnqueuedAt) {
			s.EnqueuedAt = pr.EnqueuedAt
		}
		if pr.FinishedAt.After(s.FinishedAt) {
			s.FinishedAt = pr.FinishedAt
		}
	}
	if s.State == WorkflowRunning {
		s.FinishedAt = time.Time{}
	}
	s.Tasks = parentsFirst(s.Tasks)
	return s
}

// parentsFirst orders tasks so that every task comes after its parents, and among
// the tasks whose parents are placed, by name: Kahn's order over a heap by name.
func parentsFirst(tasks []*Record) []*Record {
	byName := make(map[string]*Record, len(tasks))
	for _, t := range tasks {
		byName[t.Task] = t
	}
	waiting := make(map[string]int, len(tasks))
	ready := &byTask{}
	for _, t := range tasks {
		for _, parent := range t.Parents {
			if byName[parent] != nil {
				waiting[t.Task]++
			}
		}
		if waiting[t.Task] == 0 {
			heap.Push(ready, t)
		}
	}
	out := make([]*Record, 0, len(tasks))
	placed := make(map[string]bool, len(tasks))
	for ready.Len() > 0 {
		t := heap.Pop(ready).(*Record)
		placed[t.Task] = true
		out = append(out, t)
		for _, d := range t.Dependents {
			if waiting[d]--; waiting[d] == 0 && byName[d] != nil && !placed[d] {
				heap.Push(ready, byName[d])
			}
		}
	}
	rest := slices.DeleteFunc(slices.Clone(tasks), func(t *Record) bool { return placed[t.Task] })
	slices.SortFunc(rest, func(a, b *Record) int { return cmp.Compare(a.Task, b.Task) })
	return append(out, rest...) // not a DAG (records another client wrote): the rest by name
}

// byTask is a heap of records by task name.
type byTask []*Record

func (h byTask) Len() int           { return len(h) }
func (h byTask) Less(i, j int) bool { return h[i].Task < h[j].Task }
func (h byTask) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byTask) Push(x any)        { *h = append(*h, x.(*Record)) }
func (h *byTask) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// WorkflowSummary is one workflow as Workflows lists it: its state and its tasks'
// count per state, without the records.
type WorkflowSummary struct {
	ID                     string
	State                  WorkflowState
	Tasks                  int
	Counts                 map[State]int
	EnqueuedAt, FinishedAt time.Time
}

// Workflows lists the queue's workflows whose tasks are recorded, newest first. It
// reads every job record of the queue (as Jobs does).
func (p *Producer) Workflows(ctx context.Context) ([]WorkflowSummary, error) {
	if ctx == nil {
		return nil, fmt.Errorf("producer: list workflows on queue %s: %w", p.names.Queue, option.Nil("context"))
	}
	byID := map[string]map[string]*record.Record{}
	err := p.scanRecords(ctx, func(j ListedJob) {
		if j.Workflow == "" {
			return
		}
		if byID[j.Workflow] == nil {
			byID[j.Workflow] = map[string]*record.Record{}
		}
		byID[j.Workflow][j.ID] = &record.Record{ID: j.ID, State: record.State(j.State), Workflow: j.Workflow, Task: j.Task,
			EnqueuedAt: j.EnqueuedAt, FinishedAt: j.FinishedAt}
	})
	if err != nil {
		return nil, fmt.Errorf("producer: list workflows on queue %s: %w", p.names.Queue, err)
	}
	out := make([]WorkflowSummary, 0, len(byID))
	for id, tasks := range byID {
		s := workflowStatus(id, tasks)
		out = append(out, WorkflowSummary{ID: id, State: s.State, Tasks: len(s.Tasks), Counts: s.Counts, EnqueuedAt: s.EnqueuedAt, FinishedAt: s.FinishedAt})
	}
	slices.SortFunc(out, func(a, b WorkflowSummary) int {
		return cmp.Or(b.EnqueuedAt.Compare(a.EnqueuedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}
