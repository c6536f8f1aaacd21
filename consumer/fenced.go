package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/jsx"
	"github.com/workq/workq/internal/record"
)

// processFenced claims, runs and commits one delivery (see the package doc).
func (w *Worker) processFenced(ctx context.Context, j *Job) {
	wctx, cancel := w.writeContext(ctx)
	v, err := w.claim(wctx, j)
	cancel()
	if err != nil {
		// Without a claim nothing may run; the delivery comes back after AckWait.
		w.stats.errors.Add(1)
		w.log.Warn("claim failed; job will be redelivered", "job", j.id, "err", err)
		_ = j.msg.NakWithDelay(w.cfg.backoff(1))
		return
	}
	switch v {
	case alreadyDone:
		w.stats.alreadyDone.Add(1)
		w.ack(ctx, j)
		return
	case alreadyDead:
		j.attempt = j.claim.Attempt
		w.deadLetter(ctx, j, errors.New(j.claim.LastError), false)
		return
	case stale:
		w.stats.stale.Add(1)
		return
	case busy:
		w.stats.busy.Add(1)
		_ = j.msg.NakWithDelay(w.cfg.ackWait)
		return
	case exhausted:
		w.deadLetter(ctx, j, fmt.Errorf("%w: attempt %d of %d did not finish (worker crashed, stalled or was cut off)",
			ErrExhausted, j.claim.Attempt, j.maxAttempts), true)
		return
	}
	j.attempt = j.claim.Attempt
	herr, cause := w.run(ctx, j)
	switch {
	case errors.Is(cause, ErrStale):
		w.reassigned(j, "handler cancelled")
	case herr == nil:
		w.commit(ctx, j)
	case errors.Is(cause, errDrained):
		w.giveBack(j)
	default:
		w.fail(ctx, j, herr)
	}
}

// writeContext bounds the record writes of one outcome: they retry while the server
// is unreachable, but not past AckWait, after which the job is redelivered anyway.
func (w *Worker) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ackWait)
}

// update writes next over the claim by compare-and-set, retrying transient errors.
// It returns record.ErrConflict if the claim was overwritten.
func (w *Worker) update(ctx context.Context, j *Job, next *record.Record) error {
	wctx, cancel := w.writeContext(ctx)
	defer cancel()
	prev := j.claim.Revision
	err := jsx.Retry(wctx, func(c context.Context) error { return w.records.Update(c, next, prev) })
	if err == nil {
		j.claim = next
	}
	return err
}

// commit writes the job done with its result, fenced on the claim, then acks.
func (w *Worker) commit(ctx context.Context, j *Job) {
	next := *j.claim
	next.State, next.Result, next.FinishedAt, next.RetryAt = record.Done, j.result, time.Now(), time.Time{}
	if err := w.update(ctx, j, &next); err != nil {
		w.outcomeFailed(j, "commit", err)
		return
	}
	w.stats.committed.Add(1)
	w.ack(ctx, j)
}

// ack acknowledges the delivery and waits for the server to confirm. If it cannot,
// the job comes back, finds its record done and is acked then.
func (w *Worker) ack(ctx context.Context, j *Job) {
	wctx, cancel := w.writeContext(ctx)
	defer cancel()
	for {
		actx, c := context.WithTimeout(wctx, 2*time.Second)
		err := j.msg.DoubleAck(actx)
		c()
		if err == nil || wctx.Err() != nil || !jsx.Transient(err) {
			if err != nil {
				w.log.Warn("ack not confirmed; the job will be redelivered and acked then", "job", j.id, "err", err)
			}
			return
		}
	}
}

// fail records a handler error and retries the job after its backoff, or
// dead-letters it when the error is permanent or attempts are used up.
func (w *Worker) fail(ctx context.Context, j *Job, herr error) {
	if IsPermanent(herr) {
		w.deadLetter(ctx, j, herr, true)
		return
	}
	if j.attempt >= j.maxAttempts {
		w.deadLetter(ctx, j, fmt.Errorf("%w (%d of %d): %w", ErrExhausted, j.attempt, j.maxAttempts, herr), true)
		return
	}
	delay, ok := retryDelay(herr)
	if !ok {
		delay = w.cfg.backoff(j.attempt)
	}
	next := *j.claim
	next.State, next.LastError, next.RetryAt = record.Retrying, herr.Error(), time.Now().Add(delay)
	if err := w.update(ctx, j, &next); err != nil {
		w.outcomeFailed(j, "record retry", err)
		return
	}
	w.stats.retried.Add(1)
	_ = j.msg.NakWithDelay(delay)
}

// giveBack returns a job whose run was cut short by the worker stopping: its attempt
// is not counted and it is redelivered at once.
func (w *Worker) giveBack(j *Job) {
	next := *j.claim
	next.State, next.Attempt = record.Queued, max(0, next.Attempt-1)
	if err := w.update(context.Background(), j, &next); err != nil {
		w.outcomeFailed(j, "hand back", err)
		return
	}
	w.handBack(j.msg)
}

// outcomeFailed handles a write over the claim that did not go through: a conflict
// means the job was reassigned; anything else leaves it to be redelivered.
func (w *Worker) outcomeFailed(j *Job, what string, err error) {
	if errors.Is(err, record.ErrConflict) {
		w.reassigned(j, what+" refused")
		return
	}
	w.stats.errors.Add(1)
	w.log.Error(what+" failed; the job will be redelivered", "job", j.id, "err", err)
}

// reassigned logs and counts a run whose claim another delivery took over. It does
// not ack: the job belongs to the new owner.
func (w *Worker) reassigned(j *Job, why string) {
	w.stats.reassigned.Add(1)
	w.log.Warn(fmt.Sprintf("job %s was reassigned", j.id), "job", j.id, "attempt", j.attempt,
		"token", j.FencingToken(), "why", why)
}
