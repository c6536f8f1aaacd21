package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/workflow"
)

// SequenceInfo is where one sequence key stands: its jobs that have not ended.
type SequenceInfo struct {
	// Key is the sequence's key.
	Key string `json:"key"`
	// Active is the job of the key that is queued, running or retrying (the one the
	// others wait behind); "" when none is.
	Active string `json:"active,omitempty"`
	// Waiting counts the jobs waiting for the ones before them.
	Waiting int `json:"waiting"`
	// OldestWaiting is when the longest waiting of them was enqueued.
	OldestWaiting time.Time `json:"oldest_waiting,omitzero"`
	// Halted is the job the key halted at (its predecessor died, HaltOnDead), ""
	// when it is not halted; HaltedAfter is that predecessor.
	Halted      string `json:"halted,omitempty"`
	HaltedAfter string `json:"halted_after,omitempty"`
	// Jobs are the key's jobs that have not ended, in their order (SequenceStatus
	// only; Sequences leaves it empty).
	Jobs []*Record `json:"jobs,omitempty"`
}

// count adds r, a job of the key that has not ended (or was cancelled while it
// waited, which counts for nothing), to s.
func (s *SequenceInfo) count(r *Record) {
	switch {
	case r.State == StateCancelled:
	case r.Halted:
		s.Halted, s.HaltedAfter = r.ID, r.After
	case r.State == StateWaiting:
		s.Waiting++
		if s.OldestWaiting.IsZero() || r.EnqueuedAt.Before(s.OldestWaiting) {
			s.OldestWaiting = r.EnqueuedAt
		}
	default:
		s.Active = r.ID
	}
}

// Sequences lists the sequence keys that have jobs not ended, by key. It walks the
// index of the records Jobs keeps (reading the records written since its last use)
// and reads the records of the sequences' jobs not ended (one request per 1000).
func (p *Producer) Sequences(ctx context.Context) ([]SequenceInfo, error) {
	if ctx == nil {
		return nil, errors.New("producer: sequences: nil context")
	}
	fail := func(err error) ([]SequenceInfo, error) {
		return nil, fmt.Errorf("producer: sequences of queue %s: %w", p.names.Queue, err)
	}
	x, unlock, err := p.jobIndex(ctx)
	if err != nil {
		return fail(err)
	}
	var ids []string
	for i := range x.entries {
		if e := &x.entries[i]; e.state != 0 && e.seqKey != 0 && !x.states[e.state].Terminal() {
			ids = append(ids, e.id)
		}
	}
	unlock()
	byKey := map[string]*SequenceInfo{}
	recs := p.records.GetMany(ctx, ids)
	for _, id := range ids {
		r, ok := recs[id]
		if !ok {
			got, err := p.records.Get(ctx, id)
			if errors.Is(err, record.ErrNotFound) || errors.Is(err, record.ErrCorrupt) {
				continue
			}
			if err != nil {
				return fail(err)
			}
			r = got
		}
		if r.SequenceKey == "" || r.State.Terminal() {
			continue // ended since the index read it
		}
		s := byKey[r.SequenceKey]
		if s == nil {
			s = &SequenceInfo{Key: r.SequenceKey}
			byKey[r.SequenceKey] = s
		}
		s.count(publicRecord(r))
	}
	out := make([]SequenceInfo, 0, len(byKey))
	for _, s := range byKey {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b SequenceInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// SequenceStatus is where sequence key stands, with its jobs that have not ended in
// their order: read from the key's tail back through each job's predecessor (the
// jobs cancelled while they waited included), up to the first job that ended. A key
// with no such job is returned with no jobs.
func (p *Producer) SequenceStatus(ctx context.Context, key string) (*SequenceInfo, error) {
	if ctx == nil {
		return nil, errors.New("producer: sequence status: nil context")
	}
	s := &SequenceInfo{Key: key}
	tail, _, err := workflow.ReadLink(ctx, p.records, workflow.TailKey(key))
	if err != nil {
		return nil, fmt.Errorf("producer: sequence %q on queue %s: %w", key, p.names.Queue, err)
	}
	var jobs []*Record
	for id, n := "", 0; tail != nil && n < 1<<16; n++ {
		if id == "" {
			id = tail.Job
		}
		rec, err := p.records.Get(ctx, id)
		if errors.Is(err, record.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("producer: sequence %q on queue %s: %w", key, p.names.Queue, err)
		}
		cancelledWaiting := rec.State == record.Cancelled && len(rec.WaitingFor) > 0
		if rec.State.Terminal() && !cancelledWaiting {
			break
		}
		jobs = append(jobs, publicRecord(rec))
		if id = rec.After; id == "" {
			break
		}
	}
	slices.Reverse(jobs)
	for _, r := range jobs {
		s.count(r)
	}
	s.Jobs = jobs
	return s, nil
}

// ResumeSequence resumes sequence key, halted at a job whose predecessor died
// (HaltOnDead): that job is released and runs, and the key goes on. It returns the
// job's record as written; ErrNotHalted when no job of the key is halted.
func (p *Producer) ResumeSequence(ctx context.Context, key string) (*Record, error) {
	fail := func(err error) (*Record, error) {
		return nil, fmt.Errorf("producer: resume sequence %q on queue %s: %w", key, p.names.Queue, err)
	}
	if ctx == nil {
		return fail(errors.New("nil context"))
	}
	for range 8 {
		rec, err := p.haltedJob(ctx, key)
		if err != nil {
			return fail(err)
		}
		next := *rec
		next.State, next.Halted = record.Queued, false
		err = p.records.Update(ctx, &next, rec.Revision)
		if errors.Is(err, record.ErrConflict) {
			continue
		}
		if err != nil {
			return fail(err)
		}
		if err := p.flows.Release(ctx, &next); err != nil {
			return fail(fmt.Errorf("job %s resumed, but its message was not published (the key's next enqueue publishes it): %w", next.ID, err))
		}
		return publicRecord(&next), nil
	}
	return fail(errors.New("its halted job's record kept changing"))
}

// haltedJob finds the job sequence key is halted at: from the key's tail back
// through each job's predecessor, the jobs after a halt all wait for the one before
// them.
func (p *Producer) haltedJob(ctx context.Context, key string) (*record.Record, error) {
	tail, _, err := workflow.ReadLink(ctx, p.records, workflow.TailKey(key))
	if err != nil {
		return nil, err
	}
	if tail == nil {
		return nil, ErrNotHalted
	}
	for id := tail.Job; id != ""; {
		rec, err := p.records.Get(ctx, id)
		switch {
		case errors.Is(err, record.ErrNotFound):
			return nil, ErrNotHalted
		case err != nil:
			return nil, err
		case rec.Halted && rec.State == record.Waiting:
			return rec, nil
		case rec.State != record.Waiting:
			return nil, ErrNotHalted // the key runs: nothing before this job waits
		}
		id = rec.After
	}
	return nil, ErrNotHalted
}
