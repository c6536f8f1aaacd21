package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/wireid"
)

// The sweep finishes the enqueues their producers left half done (finish.go): a
// producer that died between its writes and its publishes, or that could not reach
// the server again before it gave up. Workers run it continually (the consumer's
// sweep.go), so that such a job runs without waiting for its key's next enqueue.
//
// It visits what an enqueue under way leaves in the bucket, oldest first, and only
// what is older than the grace, by the server's clock:
//
//   - each sequence key's tail (TailKey) and each successor link (NextKey): their
//     jobs, unclaimed, are finished (FinishEnqueue);
//   - each workflow enqueue's mark (EnqueueKey), written before the workflow's first
//     record and deleted after its roots' messages: a workflow whose records are all
//     there has its roots finished; one whose records are not (the producer died as
//     it wrote them) is removed, as the producer would have removed it.

// EnqueueGrace is how long an enqueue of a sequence's job or of a workflow may go on
// before the sweep takes its producer for dead and finishes it. A producer publishes a
// workflow's roots only within half of it from its mark, and fails the enqueue
// otherwise (cancelling its tasks), so that the sweep never removes the records of an
// enqueue still under way. A minute: far above a healthy enqueue, and a stranded job
// waits about that long.
const EnqueueGrace = time.Minute

type graceKey struct{}

// WithGrace is ctx carrying grace, for a worker run on it to sweep with in place of
// EnqueueGrace: tests shorten it, so that a producer's death is swept in seconds.
func WithGrace(ctx context.Context, grace time.Duration) context.Context {
	return context.WithValue(ctx, graceKey{}, grace)
}

// GraceOf is the grace ctx carries (WithGrace); EnqueueGrace if none.
func GraceOf(ctx context.Context) time.Duration {
	if g, ok := ctx.Value(graceKey{}).(time.Duration); ok && g > 0 {
		return g
	}
	return EnqueueGrace
}

// EnqueuePrefix is the prefix of every workflow enqueue's mark.
const EnqueuePrefix = "==.wfenq."

// EnqueueKey is the bucket key of the mark of workflow wf's enqueue.
func EnqueueKey(wf string) string { return EnqueuePrefix + wireid.Encode(wf) }

// Enqueue is the value of a workflow enqueue's mark: its tasks, and those that wait
// for none (its roots), whose messages the enqueue publishes last.
type Enqueue struct {
	Workflow string   `json:"workflow"`
	Enqueue  string   `json:"enqueue"` // this enqueue's own id: the marks of two enqueues of one workflow differ
	Tasks    []string `json:"tasks"`
	Roots    []string `json:"roots"`
}

// Swept is what one sweep did.
type Swept struct {
	Sequences int  // sequences whose last job, unclaimed, was published or told
	Workflows int  // workflows whose roots were finished
	Removed   int  // workflows removed, their records not all written
	More      bool // it stopped at sweepLimit keys of a kind: sweep again to go on
}

// sweepLimit bounds the keys of each kind one sweep visits: the next sweep goes on
// from where it stopped.
const sweepLimit = 1000

// tailPrefix is the prefix of every sequence key's tail.
const tailPrefix = "==.seq."

// Sweep finishes the enqueues older than grace, at now by the server's clock (the
// records stream's: record.Store.Now), that their producers left half done. It
// reads sweepLimit keys of each kind at most, from the cursors it keeps, and says
// More when it stopped short.
func (r *Releaser) Sweep(ctx context.Context, now time.Time, grace time.Duration) (Swept, error) {
	var s Swept
	before := now.Add(-grace)
	finish := func(id string) error {
		rec, err := r.Store.Get(ctx, id)
		switch {
		case errors.Is(err, record.ErrNotFound) || errors.Is(err, record.ErrCorrupt):
			return nil // ended long ago, or not a job's record: nothing of an enqueue
		case err != nil:
			return err
		case rec.Attempt > 0 || rec.SequenceKey == "" || rec.State.Terminal():
			return nil
		}
		did, err := r.FinishEnqueue(ctx, rec)
		if did {
			s.Sequences++
		}
		return err
	}
	// The last job of each key; then, for the jobs behind one another, each link's
	// two: the job before (an enqueue that died before its publish, and one of the
	// same key soon after, which leaves such a job alone while it is young) and the
	// one waiting for it (an enqueue that died before it told it).
	more, err := r.sweepKeys(ctx, tailPrefix, &r.tails, before, func(e record.KeyEntry) error {
		var l Link
		if json.Unmarshal(e.Value, &l) != nil || l.Job == "" {
			return nil
		}
		return finish(l.Job)
	})
	if err != nil {
		return s, fmt.Errorf("sweep sequences: %w", err)
	}
	s.More = more
	more, err = r.sweepKeys(ctx, NextPrefix, &r.links, before, func(e record.KeyEntry) error {
		var l Link
		_, pred, _ := strings.Cut(strings.TrimPrefix(e.Key, NextPrefix), ".")
		id, ok := wireid.Decode(pred)
		if !ok || json.Unmarshal(e.Value, &l) != nil || l.Job == "" {
			return nil
		}
		if err := finish(id); err != nil {
			return err
		}
		return finish(l.Job)
	})
	if err != nil {
		return s, fmt.Errorf("sweep sequences: %w", err)
	}
	s.More = s.More || more
	more, err = r.sweepKeys(ctx, EnqueuePrefix, &r.enqueues, before, func(e record.KeyEntry) error {
		var m Enqueue
		if json.Unmarshal(e.Value, &m) != nil || m.Workflow == "" {
			return nil
		}
		complete, err := r.finishWorkflow(ctx, m)
		if err != nil {
			return err
		}
		if complete {
			s.Workflows++ // a mark is deleted by its enqueue: one left is one it left
		} else {
			s.Removed++
		}
		return r.Store.DeleteKey(ctx, e.Key, e.Rev)
	})
	if err != nil {
		return s, fmt.Errorf("sweep workflows: %w", err)
	}
	s.More = s.More || more
	return s, nil
}

// sweepKeys calls each with the values under prefix written before before, oldest
// first, from revision *from on, at most sweepLimit of them. It moves *from past what
// it visited, and back to the start once it met a value written after before (the
// values after it are younger still) or none: it reports whether it stopped short.
func (r *Releaser) sweepKeys(ctx context.Context, prefix string, from *uint64, before time.Time, each func(record.KeyEntry) error) (bool, error) {
	r.mu.Lock()
	seq := *from
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		*from = seq
		r.mu.Unlock()
	}()
	for range sweepLimit {
		e, err := r.Store.FirstKeyUnder(ctx, prefix, seq)
		switch {
		case errors.Is(err, record.ErrNotFound):
			seq = 0
			return false, nil
		case err != nil:
			return true, err
		case e.At.After(before):
			seq = 0
			return false, nil
		}
		if err := each(e); err != nil {
			return true, err
		}
		seq = e.Rev + 1
	}
	return true, nil
}

// finishWorkflow finishes workflow enqueue m, which its producer left: when every
// task's record is there, each root not claimed yet is published unless the queue
// holds it (FinishEnqueue); when not, the records it wrote are removed, as its
// producer removes them when its enqueue fails before the roots.
func (r *Releaser) finishWorkflow(ctx context.Context, m Enqueue) (complete bool, err error) {
	ids := make([]string, len(m.Tasks))
	for i, t := range m.Tasks {
		ids[i] = TaskID(m.Workflow, t)
	}
	recs := r.Store.GetMany(ctx, ids) // any replica: what is missing is read again below
	for _, id := range ids {
		if recs[id] != nil {
			continue
		}
		rec, err := r.Store.Get(ctx, id)
		switch {
		case errors.Is(err, record.ErrNotFound) || errors.Is(err, record.ErrCorrupt):
			continue
		case err != nil:
			return false, err
		}
		recs[id] = rec
	}
	complete = true
	for _, id := range ids {
		if rec := recs[id]; rec == nil || rec.Workflow != m.Workflow {
			complete = false
		}
	}
	for _, id := range ids {
		rec := recs[id]
		switch {
		case rec == nil || rec.Workflow != m.Workflow || rec.Attempt > 0:
		case complete && slices.Contains(m.Roots, rec.Task):
			if _, err := r.FinishEnqueue(ctx, rec); err != nil {
				return complete, err
			}
		case !complete && !rec.State.Terminal() && rec.State != record.Running:
			if err := r.Store.Remove(ctx, id); err != nil {
				return complete, err
			}
		}
	}
	return complete, nil
}
