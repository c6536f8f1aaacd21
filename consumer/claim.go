package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/record"
)

// verdict is what a claim decided to do with a delivery.
type verdict int

const (
	runIt       verdict = iota // claimed: run the handler
	alreadyDone                // committed before; only the ack was lost: ack
	alreadyDead                // dead-lettered before; make sure the copy exists, terminate
	stale                      // a newer delivery claimed the job: do nothing
	busy                       // another live message has this job id: put back for later
	exhausted                  // the last allowed attempt never finished: dead-letter
)

// fresh is the claim this delivery writes, following prev's attempts if prev is the
// same message's record. Its Revision is 0 until it is written.
func (w *Worker) fresh(j *Job, prev *record.Record) *record.Record {
	r := &record.Record{
		ID: j.id, Queue: w.names.Queue, Kind: j.kind, State: record.Running, Attempt: 1,
		MaxAttempts: j.maxAttempts, Delivery: j.md.NumDelivered, Sequence: j.md.Sequence.Stream,
		Worker: &w.identity, EnqueuedAt: j.md.Timestamp, StartedAt: time.Now(),
	}
	if prev != nil {
		r.Attempt, r.LastError = prev.Attempt+1, prev.LastError
	}
	return r
}

// claim reads and writes the job record to decide what this delivery does. On runIt
// j.claim is the written claim (its revision is the fencing token); on exhausted and
// alreadyDead it is the record found.
func (w *Worker) claim(ctx context.Context, j *Job) (verdict, error) {
	delivery, seq := j.md.NumDelivered, j.md.Sequence.Stream
	fresh := func(prev *record.Record) *record.Record { return w.fresh(j, prev) }
	for range 8 {
		prev, err := w.records.Get(ctx, j.id)
		var next *record.Record
		switch {
		case errors.Is(err, record.ErrNotFound):
			next = fresh(nil)
			err = w.records.Create(ctx, next)
		case err != nil:
			return 0, err
		case prev.Sequence != seq:
			// The record belongs to another message with the same id: a job enqueued
			// again after the duplicate window, or requeued from dead letters.
			if !prev.State.Terminal() {
				live, err := w.messageLive(ctx, prev.Sequence)
				if err != nil {
					return 0, err
				}
				if live {
					return busy, nil
				}
			}
			next = fresh(nil)
			err = w.records.Update(ctx, next, prev.Revision)
		case prev.State == record.Done:
			return alreadyDone, nil
		case prev.State == record.Dead:
			j.claim = prev
			return alreadyDead, nil
		case prev.Delivery >= delivery:
			return stale, nil
		case prev.State == record.Running && prev.Attempt >= j.maxAttempts:
			j.claim, j.attempt = prev, prev.Attempt
			return exhausted, nil
		default:
			next = fresh(prev)
			err = w.records.Update(ctx, next, prev.Revision)
		}
		if err == nil {
			j.claim = next
			return runIt, nil
		}
		if !errors.Is(err, record.ErrConflict) {
			return 0, err
		}
		// Someone wrote the record between our read and write: read it again.
	}
	return 0, fmt.Errorf("job %s: claim kept conflicting", j.id)
}

// messageLive reports whether the stream still holds message seq (not acked,
// terminated or purged).
func (w *Worker) messageLive(ctx context.Context, seq uint64) (bool, error) {
	_, err := w.objects.Stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	return err == nil, err
}
