package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/protocol"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/wireid"
)

// Cancel cancels job id wherever it stands, and returns its record, which says
// cancelled from then on:
//
//   - scheduled (a delayed job): its schedule is removed, and it never runs, also when
//     the server fires it as Cancel runs (the worker that gets it drops it);
//   - queued or retrying: its message is removed from the queue, and it never runs
//     (again), also when a worker has it already;
//   - running: the handler's context ends with a cause matching
//     consumer.ErrCancelled at the worker's next heartbeat (a third of AckWait by
//     default); its result is never committed and it is not retried. Its message is
//     removed, but that of a sequence's job or of a workflow task with dependents
//     stays until the run has ended: what waits for the job (the next job of its
//     sequence, a dependent that runs when a parent failed) starts only then, told
//     by the worker once the handler returned — or, if that worker died, by the
//     next delivery of the message, after AckWait.
//
// The record is written first, by compare-and-set over the job's current record, so a
// job is never both cancelled and committed: the worker's claim and commit are
// compare-and-sets on the same record. Cancelling a job cancelled already returns its
// record again; a finished job is ErrFinished, an unknown id ErrNotFound.
//
// Workers running unfenced (consumer.Unfenced) see the cancel of a running job at
// their next heartbeat too, but do not read records before they run: a job already
// fetched into such a worker's buffer when it is cancelled still runs.
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

// cancel writes the cancelled record of the job's current message, then removes the
// message. It reads again after a conflicting write (a worker claimed, failed or
// committed the job meanwhile).
func (p *Producer) cancel(ctx context.Context, id string) (*record.Record, error) {
	recheck := true // a job that ran to its end between the record's read and the stream's has a record now
	for range 8 {
		prev, err := p.records.Get(ctx, id)
		if err != nil && !errors.Is(err, record.ErrNotFound) {
			return nil, err
		}
		if err == nil && !prev.State.Terminal() {
			// Queued (handed back), running or retrying: its message is prev.Sequence.
			c := *prev
			c.State, c.FinishedAt, c.RetryAt = record.Cancelled, time.Now(), time.Time{}
			c.Message = nil // a waiting task's, which is never published now
			err := p.records.Update(ctx, &c, prev.Revision)
			if errors.Is(err, record.ErrConflict) {
				continue
			}
			if err != nil {
				return nil, err
			}
			switch {
			case prev.State == record.Running && owesEnd(&c):
				// Its run goes on until its worker sees the cancel and its handler
				// returns: that worker tells what waits for it then, and removes the
				// message; one that died leaves both to the message's next delivery,
				// which finds this record. Telling now would start them beside the
				// run.
				return &c, nil
			case c.Workflow != "" || c.SequenceKey != "":
				return &c, p.cancelTask(ctx, &c)
			}
			return &c, p.removeMessage(ctx, c.Sequence)
		}
		// No record, or the record of a finished job: the job to cancel, if any, is a
		// message that no worker has claimed, delayed or queued, newer than the record.
		c, subject, err := p.waiting(ctx, id, prev)
		switch {
		case err != nil:
			return nil, err
		case c == nil && prev == nil && recheck:
			recheck = false
			continue
		case c == nil && prev == nil:
			return nil, ErrNotFound
		case c == nil && prev.State == record.Cancelled:
			return prev, nil
		case c == nil:
			return nil, fmt.Errorf("%w: it is %s", ErrFinished, prev.State)
		}
		if prev == nil {
			err = p.records.Create(ctx, c)
		} else {
			err = p.records.Update(ctx, c, prev.Revision)
		}
		if errors.Is(err, record.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if subject == p.names.DelayedSubject(id) {
			// The schedule, up to the message read (a newer one is another enqueue's).
			err = retry.Do(ctx, func(ctx context.Context) error {
				return p.objects.Stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(c.Sequence+1))
			})
			if err != nil {
				return nil, fmt.Errorf("job cancelled, but its schedule could not be removed (it will fire, and be dropped): %w", err)
			}
			return c, nil
		}
		return c, p.removeMessage(ctx, c.Sequence)
	}
	return nil, fmt.Errorf("job %s: its record kept changing", id)
}

// owesEnd reports whether the end of job c owes anything to other jobs: the next
// job of its sequence, or a workflow task's dependents.
func owesEnd(c *record.Record) bool {
	return c.SequenceKey != "" || c.Workflow != "" && len(c.Dependents) > 0
}

// cancelTask finishes the cancel of workflow task or sequence job c, which was not
// running (waiting, queued, retrying): its dependents are told (a task's cancelled,
// unless they run when a parent failed; a sequence's next job released) before its
// messages go, so that a cancel cut short leaves its message to the worker that gets
// it, which tells them then. A task whose record was written before its message
// (every task waits or is queued so until a worker claims it) names no sequence: its
// job subjects are purged (a waiting task's message is in its record only).
func (p *Producer) cancelTask(ctx context.Context, c *record.Record) error {
	if err := p.flows.Ended(ctx, c); err != nil {
		return fmt.Errorf("job cancelled, but its dependent tasks were not all told: %w", err)
	}
	if c.Sequence != 0 {
		return p.removeMessage(ctx, c.Sequence)
	}
	for _, subject := range p.names.LevelJobSubjects(c.ID) {
		err := retry.Do(ctx, func(ctx context.Context) error {
			return p.objects.Stream.Purge(ctx, jetstream.WithPurgeSubject(subject))
		})
		if err != nil {
			return fmt.Errorf("job cancelled, but its message could not be removed from the queue (a worker will drop it): %w", err)
		}
	}
	return nil
}

// waiting finds the message of job id that waits to start, delayed or queued, and
// returns the cancelled record to write for it and its subject; nil if there is
// none newer than prev, the job's finished record (nil if it has none). The record
// of a delayed job cancelled as the server fired it says so: prev is that record.
func (p *Producer) waiting(ctx context.Context, id string, prev *record.Record) (*record.Record, string, error) {
	for _, subject := range p.names.JobSubjects(id) {
		msg, err := p.lastMsg(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		q := queuedRecord(p.names.Queue, id, msg)
		if prev != nil && (msg.Sequence <= prev.Sequence || q.Enqueue == prev.Enqueue || slices.Contains(prev.Ended, q.Enqueue)) {
			// The finished job's own message, or a copy of it (a fired copy of a
			// cancelled delayed job; a copy a restarted server stored again): a worker
			// ends it without running it.
			continue
		}
		c := &record.Record{
			ID: id, Queue: p.names.Queue, Kind: q.Kind, State: record.Cancelled, MaxAttempts: q.MaxAttempts, Enqueue: q.Enqueue,
			Sequence: q.Sequence, EnqueuedAt: q.EnqueuedAt, ScheduledAt: q.ScheduledAt, FinishedAt: time.Now(),
		}
		if msg.Header.Get(queue.HeaderID) == wireid.Encode(id) {
			c.StoredAt = msg.Time // a repeat of this enqueue within the duplicate window never runs
		}
		if prev != nil {
			// The record of another enqueue, which ended: a copy of it must still
			// never run.
			c.Ended = protocol.AddEnded(prev.Ended, prev.Enqueue)
		}
		return c, subject, nil
	}
	return nil, "", nil
}

// removeMessage deletes a cancelled job's message from the queue. The record stands
// if it cannot: the worker that gets the message drops it. A message gone already
// is removed: a worker acked it, or a try whose reply was lost deleted it and the
// next found nothing (the server says so in several ways: 10037, 10043, 10057).
func (p *Producer) removeMessage(ctx context.Context, seq uint64) error {
	err := retry.Do(ctx, func(ctx context.Context) error { return p.objects.Stream.DeleteMsg(ctx, seq) })
	if err == nil || p.gone(ctx, seq) {
		return nil
	}
	return fmt.Errorf("job cancelled, but its message could not be removed from the queue (a worker will drop it): %w", err)
}

// gone reports whether the stream no longer holds message seq, as a read says.
func (p *Producer) gone(ctx context.Context, seq uint64) bool {
	err := retry.Do(ctx, func(ctx context.Context) error { _, err := p.objects.Stream.GetMsg(ctx, seq); return err })
	return errors.Is(err, jetstream.ErrMsgNotFound)
}
