package consumer

import (
	"context"
	"time"

	"github.com/workq/workq/internal/record"
)

// processUnfenced runs one delivery without claim or commit: at-least-once. It
// decides as a fenced run does (decide), and settles with an ack, a nak or a dead
// letter, writing the record best effort.
func (w *Worker) processUnfenced(ctx context.Context, j *Job) {
	if j.unique != "" && !w.holdUnique(ctx, j) {
		return
	}
	herr, cause := w.run(ctx, j)
	d := decide(herr, cause, j.attempt, j.maxAttempts, w.cfg.backoff)
	switch d.outcome {
	case lostIt: // cancelled: an unfenced run holds no claim to lose
		w.dropCancelled(j, "stopped")
	case commitIt:
		w.releaseUnique(ctx, j) // before the ack: a first run leaves no record to keep the key by
		j.lease.stop()
		if err := j.msg.Ack(); err != nil {
			w.ended(j, endUnsettled, err, 0, "step", "ack")
			return
		}
		if j.md.NumDelivered > 1 {
			// A retried job has a record saying it failed: say it is done now.
			w.putRecord(ctx, j, record.Done, nil, 0)
		}
		w.ended(j, endCommitted, nil, 0)
	case giveItBack:
		j.nak(0)
		w.ended(j, endHandedBack, nil, 0)
	case deadLetterIt:
		w.putRecord(ctx, j, record.Dead, d.reason, 0)
		w.deadLetter(ctx, j, d.reason, false)
	case retryIt:
		w.putRecord(ctx, j, record.Retrying, d.reason, d.delay)
		w.ended(j, endRetrying, d.reason, d.delay)
		j.nak(d.delay)
	}
}

// putRecord writes j's record unfenced, best effort: a lost write only makes Status
// less precise.
func (w *Worker) putRecord(ctx context.Context, j *Job, s record.State, herr error, delay time.Duration) {
	now := time.Now()
	r := &record.Record{
		ID: j.id, Queue: w.names.Queue, Kind: j.kind, State: s, Attempt: j.attempt,
		MaxAttempts: j.maxAttempts, Enqueue: j.enqueue, Sequence: j.md.Sequence.Stream,
		Worker: &w.identity, EnqueuedAt: j.enqueuedAt,
	}
	if herr != nil {
		r.LastError = recordError(herr.Error())
	}
	if s.Terminal() {
		r.FinishedAt = now
	} else {
		r.RetryAt = now.Add(delay)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := w.records.Put(wctx, r); err != nil {
		w.log.Debug("job record not written", "job", j.id, "err", err)
	}
}
