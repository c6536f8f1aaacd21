package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/attempt"
	"github.com/workq/workq/internal/record"
)

// processUnfenced runs one delivery without claim or commit: at-least-once.
func (w *Worker) processUnfenced(ctx context.Context, j *Job) {
	if j.unique != "" && !w.holdUnique(ctx, j) {
		return
	}
	herr, cause := w.run(ctx, j)
	switch {
	case errors.Is(cause, ErrCancelled):
		w.dropCancelled(j, "stopped")
	case herr == nil:
		w.releaseUnique(ctx, j) // before the ack: a first run leaves no record to keep the key by
		j.lease.stop()
		if err := j.msg.Ack(); err != nil {
			w.log.Warn("ack failed; the job will be redelivered", "job", j.id, "err", err)
			w.report(j, attempt.Unsettled, err, 0)
			return
		}
		w.stats.committed.Add(1)
		j.metrics.committed.Inc()
		if j.md.NumDelivered > 1 {
			// A retried job has a record saying it failed: say it is done now.
			w.putRecord(ctx, j, record.Done, nil, 0)
		}
		w.report(j, attempt.Committed, nil, 0)
	case errors.Is(cause, errDrained):
		w.report(j, attempt.HandedBack, nil, 0)
		w.handBack(j.lease)
	case IsPermanent(herr) || j.attempt >= j.maxAttempts:
		reason := herr
		if !IsPermanent(herr) {
			reason = fmt.Errorf("%w (%d of %d): %w", ErrExhausted, j.attempt, j.maxAttempts, herr)
		}
		w.putRecord(ctx, j, record.Dead, reason, 0)
		w.deadLetter(ctx, j, reason, false)
	default:
		delay, ok := retryDelay(herr)
		if !ok {
			delay = w.cfg.backoff(j.attempt)
		}
		w.putRecord(ctx, j, record.Retrying, herr, delay)
		w.stats.retried.Add(1)
		j.metrics.retried.Inc()
		w.report(j, attempt.Retrying, herr, delay)
		j.nak(delay)
	}
}

// putRecord writes j's record unfenced, best effort: a lost write only makes Status
// less precise.
func (w *Worker) putRecord(ctx context.Context, j *Job, s record.State, herr error, delay time.Duration) {
	now := time.Now()
	r := &record.Record{
		ID: j.id, Queue: w.names.Queue, Kind: j.kind, State: s, Attempt: j.attempt,
		MaxAttempts: j.maxAttempts, Enqueue: j.enqueue, Sequence: j.md.Sequence.Stream,
		Worker: &w.identity, EnqueuedAt: j.md.Timestamp,
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
