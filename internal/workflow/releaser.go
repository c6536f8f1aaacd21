package workflow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	Store record.Store
	JS    jetstream.JetStream
	Names queue.Names
	// Stream is the queue's jobs stream, if the caller has it; else it is looked up
	// the first time it is needed (SequenceEnded, for a job cancelled while it ran).
	Stream jetstream.Stream

	mu      sync.Mutex
	pending map[string]*telling       // by dependent's id: told, not written yet
	writing map[string]bool           // by dependent's id: a caller is writing its tellings
	wrote   map[string]*record.Record // by dependent's id: what the last write left waiting (at most maxWrote)

	tails, links, enqueues uint64 // where the sweep goes on (sweep.go)
}

// maxWrote bounds the records Releaser keeps of its last writes: the fan-ins under
// way in this process.
const maxWrote = 64

// telling is the parents told to one dependent in one write, and its outcome.
type telling struct {
	told     Told
	read     *record.Record // the dependent's record as a teller read it ahead, if one did
	done     chan struct{}
	rec      *record.Record // the dependent's record after the write (or as found)
	err      error
	finisher atomic.Bool // taken by the caller that finishes what the write started
}

// maxParallel bounds the dependents told at once by one Ended.
const maxParallel = 64

// readAtOnce is the fewest dependents whose records Ended reads in one request
// (Store.GetMany) before it tells them, rather than one read each: a fan-out's root
// tells thousands.
const readAtOnce = 8

// Ended completes what the end of task rec (done, dead or cancelled) owes its
// dependents: each is told, and one that waits for nothing more is released (the
// message kept in its record goes onto its job subject) or cancelled, the cancel
// running on to its own dependents. It is idempotent: call it again after an error, or from another
// process, and it finishes what the first call left. A job that is no workflow's
// task, or has no dependents, owes nothing.
//
// Its caller ends rec: a run of rec, if it had one, is over (rec's worker settled it,
// or a later delivery of its message found its record ended).
func (r *Releaser) Ended(ctx context.Context, rec *record.Record) error {
	return r.ended(ctx, rec, rec.ID)
}

// ended is Ended, in the course of the end of job over (rec's own, or the job whose
// end cascades to rec): over's run, if it had one, is over (see sequenceEnded).
func (r *Releaser) ended(ctx context.Context, rec *record.Record, over string) error {
	if rec.Workflow == "" && rec.SequenceKey != "" {
		return r.endedInSequence(ctx, rec, over)
	}
	if rec.Workflow == "" || len(rec.Dependents) == 0 {
		return nil
	}
	if !rec.State.Terminal() {
		return fmt.Errorf("workflow %s: task %s has not ended (%s)", rec.Workflow, rec.Task, rec.State)
	}
	failed := rec.State != record.Done
	var read map[string]*record.Record // the dependents' records, read at once: a fan-out's
	if len(rec.Dependents) >= readAtOnce {
		ids := make([]string, len(rec.Dependents))
		for i, d := range rec.Dependents {
			ids[i] = TaskID(rec.Workflow, d)
		}
		read = r.Store.GetMany(ctx, ids)
	}
	errs := make([]error, len(rec.Dependents))
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for i, d := range rec.Dependents {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			id := TaskID(rec.Workflow, d)
			if err := r.tellJob(ctx, id, rec.Task, failed, read[id], over); err != nil {
				errs[i] = fmt.Errorf("workflow %s: %w", rec.Workflow, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TellJob tells job id, which waits for parent (a workflow's task for its parent
// task, by name; a sequence's job for the job before it, by id), that parent ended
// (failed: dead, or for a task also cancelled), then finishes its release or its
// cancel. read is its record as read ahead, or nil. Telling is idempotent.
func (r *Releaser) TellJob(ctx context.Context, id, parent string, failed bool, read *record.Record) error {
	return r.tellJob(ctx, id, parent, failed, read, parent)
}

// tellJob is TellJob in the course of the end of job over (see ended).
func (r *Releaser) tellJob(ctx context.Context, id, parent string, failed bool, read *record.Record, over string) error {
	dep, err := r.tell(ctx, id, parent, failed, read)
	if err != nil {
		return fmt.Errorf("telling job %s that %s ended: %w", id, parent, err)
	}
	switch {
	case dep == nil:
		return nil
	case dep.State == record.Queued && dep.Attempt == 0:
		// Released, by this write or an earlier one whose teller may have died
		// before it published: publishing again is one job all the same.
		return r.Release(ctx, dep)
	case dep.State == record.Cancelled && dep.Attempt == 0:
		// Cancelled before it was ever claimed, for a failed parent or by an
		// operator: its own dependents are told (again: telling is idempotent), as
		// its teller may have died first. One cancelled after a claim is told about
		// again only when a parent's end is told twice; its own end tells its
		// dependents — after its run, if it was cancelled as it ran, which may go on
		// now: it is not for this telling to release them beside it.
		return r.ended(ctx, dep, over)
	}
	return nil // waiting still, or claimed: its message was published
}

// tell adds parent to what dependent id is told next and waits for the write that
// carries it. The first caller for a dependent writes, and goes on writing what
// others told meanwhile, so that concurrent tellings of one dependent share writes.
// It returns the dependent's record after the write, nil if it has none — or if
// another caller sharing the write finishes what it started (one publish of a
// released task, one cascade of a cancelled one, per write).
func (r *Releaser) tell(ctx context.Context, id, parent string, failed bool, read *record.Record) (*record.Record, error) {
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
	if t.read == nil {
		t.read = read
	}
	writer := !r.writing[id]
	r.writing[id] = true
	r.mu.Unlock()
	if writer {
		r.writeAll(ctx, id)
	}
	select {
	case <-t.done:
		if t.err == nil && !t.finisher.CompareAndSwap(false, true) {
			return nil, nil
		}
		return t.rec, t.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// writeAll writes dependent id's pending tellings until none is left. Each write
// starts from the record this releaser's last write of id left waiting, when it
// keeps one (a fan-in's tellings come one after another, and its record, which
// names every parent, is the largest a workflow has: reading it again for each
// cost more than the write), or from the record a teller read ahead. The
// compare-and-set checks that nobody wrote it meanwhile.
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
		last := r.wrote[id]
		delete(r.wrote, id)
		r.mu.Unlock()
		if last == nil {
			last = t.read
		}
		t.rec, t.err = r.write(ctx, id, t.told, last)
		if t.err == nil && t.rec != nil && t.rec.State == record.Waiting {
			r.mu.Lock()
			if r.wrote == nil {
				r.wrote = map[string]*record.Record{}
			}
			for k := range r.wrote {
				if len(r.wrote) < maxWrote {
					break
				}
				delete(r.wrote, k)
			}
			r.wrote[id] = t.rec
			r.mu.Unlock()
		}
		close(t.done)
	}
}

// write tells dependent id about told by compare-and-set on its record (Tell),
// reading again after a conflict: another parent's telling, or this one's own try
// whose reply was lost — telling again then changes nothing. It starts from last,
// the record this releaser last wrote, if given; when last says there is nothing
// to write, the record is read (nobody else may have written it since).
func (r *Releaser) write(ctx context.Context, id string, told Told, last *record.Record) (*record.Record, error) {
	for range 64 {
		cur, cached := last, last != nil
		last = nil
		if !cached {
			var err error
			cur, err = r.Store.Get(ctx, id)
			if errors.Is(err, record.ErrNotFound) {
				return nil, nil // removed (an operator, or a rolled back enqueue): nothing waits
			}
			if err != nil {
				return nil, err
			}
		}
		next, changed := Tell(cur, told, time.Now())
		if !changed {
			if cached {
				continue // read it: what this releaser wrote may be stale
			}
			return cur, nil
		}
		err := retry.Do(ctx, func(ctx context.Context) error { return r.Store.Update(ctx, &next, cur.Revision) })
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

// Release publishes the message kept in released job dep's record onto its job
// subject, with the job id as its message id. Publishing it twice is one job all the
// same: the copies carry the same id (deduplicated within the window) and the same
// enqueue, whose record lets one run. A record with no message (a root's, or one
// written by another client) has nothing to publish.
func (r *Releaser) Release(ctx context.Context, dep *record.Record) error {
	m := dep.Message
	if m == nil {
		return nil
	}
	if !validTarget(r.Names, dep.ID, m.Subject) {
		return fmt.Errorf("job %s: its record names %q as its message's subject, not one of the job's", dep.ID, m.Subject)
	}
	h := make(nats.Header, len(m.Header)+1)
	for k, v := range m.Header {
		h[k] = v
	}
	h.Set(queue.HeaderID, wireid.Encode(dep.ID))
	msg := &nats.Msg{Subject: m.Subject, Header: h, Data: m.Data}
	err := retry.Do(ctx, func(ctx context.Context) error { _, err := r.JS.PublishMsg(ctx, msg); return err })
	if err != nil {
		return fmt.Errorf("job %s: releasing its message: %w", dep.ID, err)
	}
	return nil
}

// inQueue reports whether the queue's jobs stream holds message seq.
func (r *Releaser) inQueue(ctx context.Context, seq uint64) (bool, error) {
	s, err := r.stream(ctx)
	if err != nil {
		return false, err
	}
	in := false
	err = retry.Do(ctx, func(ctx context.Context) error {
		_, err := s.GetMsg(ctx, seq)
		in = err == nil
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		return err
	})
	return in, err
}

// stream is the queue's jobs stream, looked up the first time it is needed.
func (r *Releaser) stream(ctx context.Context) (jetstream.Stream, error) {
	r.mu.Lock()
	s := r.Stream
	r.mu.Unlock()
	if s != nil {
		return s, nil
	}
	err := retry.Do(ctx, func(ctx context.Context) error {
		var err error
		s, err = r.JS.Stream(ctx, r.Names.Stream)
		return err
	})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.Stream = s
	r.mu.Unlock()
	return s, nil
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
