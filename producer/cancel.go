package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
)

// ErrNotScheduled: Cancel found the job, but it is no longer (or never was) waiting
// for its time: it is queued, running, retrying, done or dead. The error names its
// state.
var ErrNotScheduled = errors.New("job is not scheduled")

// Cancel cancels a delayed job before it starts: its schedule is removed and its
// record says cancelled, so it never runs, also when the server fires it as Cancel
// runs (the worker that gets the fired job finds the record and drops the job).
// Cancelling a job cancelled already returns its record again. A job that is not
// waiting any more is ErrNotScheduled, and an unknown id ErrNotFound. It returns the
// cancelled job's record.
func (p *Producer) Cancel(ctx context.Context, id string) (*Record, error) {
	if ctx == nil {
		return nil, fmt.Errorf("producer: cancel job %s on queue %s: %w", id, p.names.Queue, option.Nil("context"))
	}
	if err := queue.CheckID(id); err != nil {
		return nil, fmt.Errorf("producer: cancel on queue %s: %w", p.names.Queue, err)
	}
	rec, err := p.cancel(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("producer: cancel job %s on queue %s: %w", id, p.names.Queue, err)
	}
	return publicRecord(rec), nil
}

func (p *Producer) cancel(ctx context.Context, id string) (*record.Record, error) {
	subject := p.names.DelayedSubject(id)
	msg, err := p.objects.Stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return p.notScheduled(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	q := queuedRecord(p.names.Queue, id, msg)
	cancelled := &record.Record{
		ID: id, Queue: p.names.Queue, Kind: q.Kind, State: record.Cancelled, MaxAttempts: q.MaxAttempts,
		Sequence: q.Sequence, EnqueuedAt: q.EnqueuedAt, ScheduledAt: q.ScheduledAt, FinishedAt: time.Now(),
	}
	// The record first: from then on a worker that gets the job fired drops it. Then
	// the schedule, up to the message read (a newer one is another enqueue's).
	if err := p.writeCancelled(ctx, cancelled); err != nil {
		return nil, err
	}
	if err := p.objects.Stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(msg.Sequence+1)); err != nil {
		// The record stands: a worker drops the job when it fires.
		return nil, fmt.Errorf("job cancelled, but its schedule could not be removed (it will fire, and be dropped): %w", err)
	}
	return cancelled, nil
}

// writeCancelled writes the cancelled record c. A record of the id may exist: this
// job's, written by a worker that claimed it as it fired (then it is not scheduled
// any more), or an earlier job's that ended (then it is replaced).
func (p *Producer) writeCancelled(ctx context.Context, c *record.Record) error {
	for range 8 {
		prev, err := p.records.Get(ctx, c.ID)
		switch {
		case errors.Is(err, record.ErrNotFound):
			err = p.records.Create(ctx, c)
		case err != nil:
			return err
		case prev.ScheduledAt.Equal(c.ScheduledAt) && prev.Schedule == "":
			if prev.State == record.Cancelled {
				*c = *prev
				return nil
			}
			return fmt.Errorf("%w: it is %s", ErrNotScheduled, prev.State)
		case !prev.State.Terminal():
			return fmt.Errorf("%w: another job with this id is %s; cancel again when it has ended", ErrNotScheduled, prev.State)
		default:
			err = p.records.Update(ctx, c, prev.Revision)
		}
		if !errors.Is(err, record.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("job %s: its record kept changing", c.ID)
}

// notScheduled settles the cancel of id, which has no schedule: the record of a job
// cancelled already, or ErrNotScheduled naming the job's state, or ErrNotFound.
func (p *Producer) notScheduled(ctx context.Context, id string) (*record.Record, error) {
	rec, err := p.records.Get(ctx, id)
	switch {
	case err == nil && rec.State == record.Cancelled:
		return rec, nil
	case err == nil:
		return nil, fmt.Errorf("%w: it is %s", ErrNotScheduled, rec.State)
	case !errors.Is(err, record.ErrNotFound):
		return nil, err
	}
	_, err = p.objects.Stream.GetLastMsgForSubject(ctx, p.names.JobSubject(id))
	switch {
	case err == nil:
		return nil, fmt.Errorf("%w: it is %s", ErrNotScheduled, StateQueued)
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, ErrNotFound
	}
	return nil, err
}
