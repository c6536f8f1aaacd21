package workflow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/wireid"
)

// Releaser tells a task's dependents that it ended, releasing or cancelling those
// that wait for nothing more. One per process and queue: it merges the tellings of
// one dependent by many parents ending at once (a fan-in) into one write.
type Releaser struct {
	Store  record.Store
	Stream jetstream.Stream // the queue's jobs stream
	JS     jetstream.JetStream
	Names  queue.Names

	mu      sync.Mutex
	pending map[string]*telling // by dependent's id: told, not written yet
	writing map[string]bool     // by dependent's id: a caller is writing its tellings
}

// telling is the parents told to one dependent in one write, and its outcome.
type telling struct {
	told Told
	done chan struct{}
	rec  *record.Record // the dependent's record after the write (or as found)
	err  error
}

// maxParallel bounds the dependents told at once by one Ended.
const maxParallel = 64

// Ended completes what the end of task rec (done, dead or cancelled) owes its
// dependents: each is told, and one that waits for nothing more is released (its
// held message goes onto its job subject) or cancelled, the cancel running on to its
// own dependents. It is idempotent: call it again after an error, or from another
// process, and it finishes what the first call left. A job that is no workflow's
// task, or has no dependents, owes nothing.
func (r *Releaser) Ended(ctx context.Context, rec *record.Record) error {
	if rec.Workflow == "" || len(rec.Dependents) == 0 {
		return nil
	}
	if !rec.State.Terminal() {
		return fmt.Errorf("workflow %s: task %s has not ended (%s)", rec.Workflow, rec.Task, rec.State)
	}
	failed := rec.State != record.Done
	errs := make([]error, len(rec.Dependents))
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for i, d := range rec.Dependents {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = r.tellOne(ctx, rec.Workflow, d, rec.Task, failed)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// tellOne tells dependent task of workflow wf that parent ended, then finishes its
// release or its cancel.
func (r *Releaser) tellOne(ctx context.Context, wf, task, parent string, failed bool) error {
	id := TaskID(wf, task)
	dep, err := r.tell(ctx, id, parent, failed)
	if err != nil {
		return fmt.Errorf("workflow %s: telling task %s that %s ended: %w", wf, task, parent, err)
	}
	switch {
	case dep == nil:
		return nil
	case dep.State == record.Waiting:
		return nil
	case dep.State == record.Queued && dep.Attempt == 0:
		return r.release(ctx, id)
	case dep.State == record.Cancelled:
		// Cancelled for a failed parent: its held message goes once its own
		// dependents are told, so that finding it held means "not finished yet".
		held, err := r.heldMsg(ctx, id)
		if err != nil || held == nil {
			return err
		}
		if err := r.Ended(ctx, dep); err != nil {
			return err
		}
		return r.DropHeld(ctx, id)
	}
	// Claimed already: its job message was published. A held copy still there is
	// one whose removal the release did not finish (its worker died, or the delete
	// timed out in a leader election); telling again, after the parent's message
	// came back, removes it.
	held, err := r.heldMsg(ctx, id)
	if err != nil || held == nil {
		return err
	}
	return r.dropHeldUpTo(ctx, id, held.Sequence)
}

// tell adds parent to what dependent id is told next and waits for the write that
// carries it. The first caller for a dependent writes, and goes on writing what
// others told meanwhile, so that concurrent tellings of one dependent share writes.
// It returns the dependent's record after the write, nil if it has none.
func (r *Releaser) tell(ctx context.Context, id, parent string, failed bool) (*record.Record, error) {
	r.mu.Lock()
	if r.pending == nil {
		r.pending, r.writing = map[string]*telling{}, map[string]bool{}
	}
	t := r.pending[id]
	if t == nil {
		t = &telling{told: Told{}, done: make(chan struct{})}
		r.pending[id] = t
	}
	t.told[parent] = failed
	writer := !r.writing[id]
	r.writing[id] = true
	r.mu.Unlock()
	if writer {
		r.writeAll(ctx, id)
	}
	select {
	case <-t.done:
		return t.rec, t.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// writeAll writes dependent id's pending tellings until none is left.
func (r *Releaser) writeAll(ctx context.Context, id string) {
	for {
		r.mu.Lock()
		t := r.pending[id]
		delete(r.pending, id)
		if t == nil {
			delete(r.writing, id)
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		t.rec, t.err = r.write(ctx, id, t.told)
		close(t.done)
	}
}

// write tells dependent id about told by compare-and-set on its record (Tell),
// reading again after a conflict: another parent's telling, or this one's own try
// whose reply was lost — telling again then changes nothing.
func (r *Releaser) write(ctx context.Context, id string, told Told) (*record.Record, error) {
	for range 64 {
		cur, err := r.Store.Get(ctx, id)
		if errors.Is(err, record.ErrNotFound) {
			return nil, nil // removed (an operator, or a rolled back enqueue): nothing waits
		}
		if err != nil {
			return nil, err
		}
		next, changed := Tell(cur, told, time.Now())
		if !changed {
			return cur, nil
		}
		err = retry.Do(ctx, func(ctx context.Context) error { return r.Store.Update(ctx, &next, cur.Revision) })
		if errors.Is(err, record.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &next, nil
	}
	return nil, fmt.Errorf("job %s: its record kept changing", id)
}

// release puts released task id's held message onto its job subject, then drops the
// held copy. A task whose held message is gone was put there before (this is a
// repeat); one put there twice is one job all the same: the copies carry the same
// id (deduplicated within the window) and the same enqueue, whose record lets one
// run.
func (r *Releaser) release(ctx context.Context, id string) error {
	held, err := r.heldMsg(ctx, id)
	if err != nil || held == nil {
		return err
	}
	target := held.Header.Get(queue.HeaderHeldTarget)
	if !validTarget(r.Names, id, target) {
		return fmt.Errorf("job %s: its held message names %q as its subject, not one of the job's", id, target)
	}
	h := make(nats.Header, len(held.Header))
	for k, v := range held.Header {
		h[k] = v
	}
	h.Del(queue.HeaderHeldTarget)
	h.Set(queue.HeaderID, wireid.Encode(id))
	msg := &nats.Msg{Subject: target, Header: h, Data: held.Data}
	err = retry.Do(ctx, func(ctx context.Context) error { _, err := r.JS.PublishMsg(ctx, msg); return err })
	if err != nil {
		return fmt.Errorf("job %s: releasing its message: %w", id, err)
	}
	return r.dropHeldUpTo(ctx, id, held.Sequence)
}

// dropHeldUpTo removes task id's held messages up to sequence seq: the one released,
// and any older copy (a run that added the task and died before its commit left one,
// and the committing run published another).
func (r *Releaser) dropHeldUpTo(ctx context.Context, id string, seq uint64) error {
	return retry.Do(ctx, func(ctx context.Context) error {
		return r.Stream.Purge(ctx, jetstream.WithPurgeSubject(r.Names.HeldSubject(id)), jetstream.WithPurgeSequence(seq+1))
	})
}

// validTarget reports whether subject is one of job id's job subjects.
func validTarget(n queue.Names, id, subject string) bool {
	for _, s := range n.LevelJobSubjects(id) {
		if s == subject {
			return true
		}
	}
	return false
}

// heldMsg reads task id's held message; nil if there is none.
func (r *Releaser) heldMsg(ctx context.Context, id string) (*jetstream.RawStreamMsg, error) {
	var m *jetstream.RawStreamMsg
	err := retry.Do(ctx, func(ctx context.Context) (err error) {
		m, err = r.Stream.GetLastMsgForSubject(ctx, r.Names.HeldSubject(id))
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

// DropHeld removes task id's held message, if any: the task was cancelled before it
// was released.
func (r *Releaser) DropHeld(ctx context.Context, id string) error {
	return retry.Do(ctx, func(ctx context.Context) error {
		return r.Stream.Purge(ctx, jetstream.WithPurgeSubject(r.Names.HeldSubject(id)))
	})
}
