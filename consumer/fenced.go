package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/attempt"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/retry"
)

// processFenced claims, runs and commits one delivery (see the package doc).
func (w *Worker) processFenced(ctx context.Context, j *Job) {
	v, err := w.claimDelivery(ctx, j)
	if err != nil {
		// Without a claim nothing may run; the delivery comes back after a backoff.
		w.stats.errors.Add(1)
		j.metrics.failed.Inc()
		w.log.Warn("claim failed; the job will be redelivered", "job", j.id, "err", err)
		w.report(j, attempt.Unsettled, err, 0)
		j.nak(w.cfg.backoff(1))
		return
	}
	switch v {
	case alreadyDone:
		w.stats.alreadyDone.Add(1)
		w.ack(j)
		return
	case cancelled:
		w.dropCancelled(j, "dropped before it ran")
		return
	case alreadyDead:
		j.attempt = j.claim.Attempt
		w.deadLetter(ctx, j, errors.New(j.claim.LastError), false)
		return
	case stale, heldOld:
		// Another delivery owns the job (or may: a run through a replaced consumer):
		// leave the job to it, and to the server's AckWait if it is gone.
		j.lease.stop()
		w.stats.stale.Add(1)
		j.metrics.stale.Inc()
		return
	case busy:
		w.stats.busy.Add(1)
		j.nak(w.cfg.ackWait)
		return
	case early:
		w.stats.early.Add(1)
		j.nak(j.retryIn)
		return
	case unreadable:
		w.stats.errors.Add(1)
		j.metrics.failed.Inc()
		w.log.Error(fmt.Sprintf("job %s: the value at its key is not its record; moving the job to dead letters without running it", j.id),
			"job", j.id, "sequence", j.md.Sequence.Stream, "delivery", j.md.NumDelivered, "err", j.unreadable)
		w.deadLetter(ctx, j, fmt.Errorf("job did not run: %w", j.unreadable), true)
		return
	case exhausted:
		w.deadLetter(ctx, j, fmt.Errorf("%w: %d attempts (of %d allowed) did not finish: the worker died, stalled or was cut off while running the job",
			ErrExhausted, j.attempt, j.maxAttempts), true)
		return
	}
	if j.unique != "" && !w.holdUnique(ctx, j) {
		return
	}
	j.attempt = j.claim.Attempt
	herr, cause := w.run(ctx, j)
	w.background(func() {
		switch {
		case errors.Is(cause, ErrStale):
			w.lostClaim(j, cause, "handler cancelled")
		case herr == nil:
			w.commit(ctx, j)
		case errors.Is(cause, errDrained):
			w.giveBack(j)
		default:
			w.fail(ctx, j, herr)
		}
	})
}

// writeContext bounds the record writes of one outcome: they retry while the server
// is unreachable, but not past AckWait, after which the job is redelivered anyway.
func (w *Worker) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ackWait)
}

// update writes the claim, as change edits a copy of it, by compare-and-set. A claim
// that was never written is created instead, which fails the same way if a later
// delivery has claimed the job. It returns record.ErrConflict if the job was claimed
// by another delivery.
func (w *Worker) update(ctx context.Context, j *Job, change func(next *record.Record)) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lost {
		return fmt.Errorf("%w: job %s", record.ErrConflict, j.id)
	}
	next := *j.claim
	change(&next)
	err := w.put(ctx, j, &next, j.claim.Revision)
	switch {
	case err == nil:
		j.claim = &next
	case errors.Is(err, record.ErrConflict):
		j.loseLocked(ErrStale) // settled by lostClaim, which reads why
	}
	return err
}

// put writes next over revision prev by compare-and-set; prev 0 creates it (over a
// finished record of an earlier message with the same id, too). It retries transient
// errors, each try bounded by a quarter of the write budget, so that a try lost with a
// failed node leaves time for more once a new leader is elected; and a try that
// landed with its reply lost is recognised as this run's own write.
func (w *Worker) put(ctx context.Context, j *Job, next *record.Record, prev uint64) error {
	wctx, cancel := w.writeContext(ctx)
	defer cancel()
	perTry := min(max(w.cfg.ackWait/4, 200*time.Millisecond), 5*time.Second)
	return retry.DoEach(wctx, perTry, func(c context.Context) error {
		var err error
		if prev == 0 {
			err = w.createOver(c, j, next)
		} else {
			err = w.records.Update(c, next, prev)
		}
		if errors.Is(err, record.ErrConflict) && prev != 0 {
			return w.settleConflict(c, j, next, prev, err)
		}
		return err
	})
}

// settleConflict decides what a refused compare-and-set over revision prev means.
// The record may have moved on: to this run's own write (an earlier try that landed
// with its reply lost), which is success, or to another run's, which is the
// conflict. Or it may not have moved yet: a replicated stream refuses a write while
// another write of the same key is in flight (error 10164) — most likely this run's
// earlier try, still being replicated after a change of leader — so it looks again
// until the record moves, for as long as ctx lets it. A record that never moves
// returns the conflict, and so does one that moved to a value that is not a record,
// or was removed. A record that could not be read at all leaves the outcome unknown,
// which is not a conflict: the read's error is returned (the write may be this run's
// own).
func (w *Worker) settleConflict(ctx context.Context, j *Job, next *record.Record, prev uint64, conflict error) error {
	for read := false; ; read = true {
		cur, err := w.records.Get(ctx, j.id)
		switch {
		case errors.Is(err, record.ErrCorrupt), errors.Is(err, record.ErrNotFound), err != nil && read:
			return conflict
		case err != nil:
			return fmt.Errorf("job %s: after a refused write, the record could not be read: %w", j.id, err)
		case cur.Revision > prev && sameWrite(cur, next):
			next.Revision = cur.Revision
			return nil
		case cur.Revision > prev:
			return conflict
		}
		select {
		case <-ctx.Done():
			return conflict
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// sameWrite reports whether the stored record cur is the write next: the same run
// in the same state.
func sameWrite(cur, next *record.Record) bool {
	return sameRun(cur, next) && cur.State == next.State
}

// sameRun reports whether cur was written by the run that writes next: the same
// message, delivery, attempt, worker and start.
func sameRun(cur, next *record.Record) bool {
	return cur.Sequence == next.Sequence && cur.Delivery == next.Delivery && cur.Epoch == next.Epoch && cur.Attempt == next.Attempt &&
		cur.StartedAt.Equal(next.StartedAt) &&
		cur.Worker != nil && next.Worker != nil && *cur.Worker == *next.Worker
}

// createOver creates next as the job's first record, or replaces a finished record
// left by an earlier message with the same id (enqueued again after the duplicate
// window, or requeued from dead letters). A record this same run wrote already (a
// claim that landed though its reply was lost, so the run never learnt its revision)
// is this run's own: next is that write, or is written over it. A finished record
// of the same firing (sameFiring) is not replaced: it is the conflict it is.
func (w *Worker) createOver(ctx context.Context, j *Job, next *record.Record) error {
	err := w.records.Create(ctx, next)
	if !errors.Is(err, record.ErrConflict) {
		return err
	}
	old, gerr := w.records.Get(ctx, j.id)
	switch {
	case errors.Is(gerr, record.ErrCorrupt), errors.Is(gerr, record.ErrNotFound):
		return err
	case gerr != nil:
		return fmt.Errorf("job %s: after a refused create, the record could not be read: %w", j.id, gerr) // unknown, not a conflict
	case sameWrite(old, next):
		next.Revision = old.Revision
		return nil
	case sameRun(old, next) && !old.State.Terminal():
		return w.records.Update(ctx, next, old.Revision)
	case old.Sequence == next.Sequence || !old.State.Terminal() || w.forgottenDuplicate(j, old) || sameFiring(j, old):
		return err
	}
	return w.records.Update(ctx, next, old.Revision)
}

// commit writes the job done with its result, fenced on the claim, then acks. A
// result too large for the record fails the job for good instead: it could never be
// committed, and the job would run again and again.
func (w *Worker) commit(ctx context.Context, j *Job) {
	if err := w.checkResult(j); err != nil {
		w.fail(ctx, j, err)
		return
	}
	err := w.update(ctx, j, func(next *record.Record) {
		next.State, next.Result, next.FinishedAt, next.RetryAt = record.Done, j.result, time.Now(), time.Time{}
	})
	if err != nil {
		w.outcomeFailed(j, "commit", err)
		return
	}
	w.releaseUnique(ctx, j)
	w.stats.committed.Add(1)
	j.metrics.committed.Inc()
	w.report(j, attempt.Committed, nil, 0)
	w.ack(j)
}

// ack acknowledges the delivery without waiting for the server to confirm it. The
// job's record says done already, and the record is the truth: an ack that is lost
// only means that the job comes back after AckWait, finds its record done and is
// acked then, without running. Waiting for the confirmation would cost a reply per
// job and hold the delivery's goroutine for a round trip (on a server that fsyncs
// every write, for the fsync of the job's removal from the stream).
func (w *Worker) ack(j *Job) {
	j.lease.stop()
	if err := j.msg.Ack(); err != nil {
		w.log.Warn("ack not sent; the job will be redelivered and acked then", "job", j.id, "err", err)
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
	err := w.update(ctx, j, func(next *record.Record) {
		next.State, next.LastError, next.RetryAt = record.Retrying, recordError(herr.Error()), time.Now().Add(delay)
	})
	if err != nil {
		w.outcomeFailed(j, "record retry", err)
		return
	}
	w.stats.retried.Add(1)
	j.metrics.retried.Inc()
	w.log.Info("job failed; it will be retried", "job", j.id, "attempt", j.attempt, "of", j.maxAttempts, "in", delay.Round(time.Millisecond), "err", firstLine(herr))
	w.report(j, attempt.Retrying, herr, delay)
	j.nak(delay)
}

// giveBack returns a job whose run was cut short by the worker stopping: its attempt
// is not counted and it is redelivered at once.
func (w *Worker) giveBack(j *Job) {
	err := w.update(context.Background(), j, func(next *record.Record) {
		next.State, next.Attempt = record.Queued, max(0, next.Attempt-1)
	})
	if err != nil {
		w.outcomeFailed(j, "hand back", err)
		return
	}
	w.report(j, attempt.HandedBack, nil, 0)
	j.nak(0)
	w.stats.handedBack.Add(1)
}

// outcomeFailed handles a write over the claim that did not go through: a conflict
// means the job was reassigned; anything else leaves it to be redelivered.
func (w *Worker) outcomeFailed(j *Job, what string, err error) {
	if errors.Is(err, record.ErrConflict) {
		w.lostClaim(j, nil, what+" refused")
		return
	}
	j.lease.stop()
	w.stats.errors.Add(1)
	j.metrics.failed.Inc()
	w.log.Error(what+" failed; the job will be redelivered", "job", j.id, "err", err)
	w.report(j, attempt.Unsettled, err, 0)
}

// reassigned logs and counts a run whose claim another delivery took over. It does
// not ack: the job belongs to the new owner.
func (w *Worker) reassigned(j *Job, why string) {
	j.lease.stop()
	w.stats.reassigned.Add(1)
	j.metrics.reassigned.Inc()
	w.log.Warn(fmt.Sprintf("job %s was reassigned", j.id), "job", j.id, "attempt", j.attempt,
		"token", j.token(), "why", why)
	w.report(j, attempt.Stale, ErrStale, 0)
}
