package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/attempt"
	"github.com/workq/workq/internal/record"
)

// processFenced claims, runs and settles one delivery (see the package doc and
// docs/delivery.md).
func (w *Worker) processFenced(ctx context.Context, j *Job) {
	if !w.claimed(ctx, j) {
		return
	}
	if j.unique != "" && !w.holdUnique(ctx, j) {
		return
	}
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

// claimed claims j and reports whether it may run; a delivery that may not is ended
// here as its verdict says: acked, terminated, dead-lettered, watched or put back.
func (w *Worker) claimed(ctx context.Context, j *Job) bool {
	v, err := w.claimDelivery(ctx, j)
	if err != nil {
		// Without a claim nothing may run; the delivery comes back after a backoff.
		w.stats.errors.Add(1)
		j.metrics.failed.Inc()
		w.log.Warn("claim failed; the job will be redelivered", "job", j.id, "err", err)
		w.report(j, attempt.Unsettled, err, 0)
		j.nak(w.cfg.backoff(1))
		return false
	}
	switch v {
	case runIt:
		return true
	case alreadyDone:
		w.stats.alreadyDone.Add(1)
		w.ack(j)
	case cancelled:
		w.dropCancelled(j, "dropped before it ran")
	case alreadyDead:
		if j.claim.Sequence != j.md.Sequence.Stream {
			// Another copy of the enqueue that died: its own message publishes the
			// dead letter before it is terminated.
			w.stats.alreadyDone.Add(1)
			j.term()
			break
		}
		w.deadLetter(ctx, j, errors.New(j.claim.LastError), false)
	case watched:
		w.stats.stale.Add(1)
		j.metrics.stale.Inc()
		w.watch(j.lease, min(j.retryIn, w.cfg.heartbeat))
	case busy:
		w.stats.busy.Add(1)
		j.nak(j.retryIn)
	case early:
		w.stats.early.Add(1)
		j.nak(j.retryIn)
	case unreadable:
		w.stats.errors.Add(1)
		j.metrics.failed.Inc()
		w.log.Error(fmt.Sprintf("job %s: the value at its key is not its record; moving the job to dead letters without running it", j.id),
			"job", j.id, "sequence", j.md.Sequence.Stream, "delivery", j.md.NumDelivered, "err", j.unreadable)
		w.deadLetter(ctx, j, fmt.Errorf("job did not run: %w", j.unreadable), true)
	case exhausted:
		w.deadLetter(ctx, j, fmt.Errorf("%w: %d attempts (of %d allowed) did not finish: the worker died, stalled or was cut off while running the job",
			ErrExhausted, j.attempt, j.maxAttempts), true)
	}
	return false
}

// watch keeps a delivery whose job another run holds off the handler slots for wait,
// its lease reporting progress, then hands it to a slot to decide again: the holder
// may have ended the job, or gone a whole lease without renewing its claim. A worker
// that stops meanwhile hands it back.
func (w *Worker) watch(l *lease, wait time.Duration) {
	w.watching.Add(1)
	go func() {
		defer w.watching.Done()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-w.gateCtx.Done():
			w.handBack(l)
			return
		}
		l.src.puller.held.Add(1) // the slot that takes it finishes it (puller.done)
		select {
		case w.rewatch <- l:
		case <-w.gateCtx.Done():
			l.src.puller.held.Add(-1)
			w.handBack(l)
		}
	}()
}

// writeContext bounds the record writes of one outcome: they retry while the server
// is unreachable, but not past AckWait, after which the job is redelivered anyway.
func (w *Worker) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ackWait)
}

// update writes the claim, as change edits a copy of it, by compare-and-set on the
// claim's revision (cas), within a write context. It returns record.ErrConflict if
// the claim was lost: the job was taken over or cancelled, and the run's handler is
// cancelled with the cause (lostCause).
func (w *Worker) update(ctx context.Context, j *Job, change func(next *record.Record)) error {
	wctx, cancel := w.writeContext(ctx)
	defer cancel()
	return w.writeClaim(wctx, j, change)
}

// writeClaim is update within ctx. A nil change renews the claim: the same record
// written again, only while it says running (not once the run has settled).
func (w *Worker) writeClaim(ctx context.Context, j *Job, change func(next *record.Record)) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lost {
		return fmt.Errorf("%w: job %s", record.ErrConflict, j.id)
	}
	if change == nil && j.claim.State != record.Running {
		return nil
	}
	next := *j.claim
	next.Run = j.run
	if change != nil {
		change(&next)
	}
	err := w.cas(ctx, &next, j.claim.Revision)
	switch {
	case err == nil:
		j.claim = &next
	case errors.Is(err, record.ErrConflict):
		j.loseLocked(w.lostCause(ctx, j)) // settled by lostClaim
	}
	return err
}

// renew renews a running job's claim, beside a progress report: the same record
// written again, which moves its revision, so that other workers see the claim alive
// (a claim whose revision stands unchanged for its lease is taken over). A claim found
// lost cancels the handler (writeClaim) and ends the progress reports. It gets up to
// half of what is left of AckWait after a heartbeat, and never less than the interval.
func (w *Worker) renew(j *Job) {
	ctx, c := context.WithTimeout(context.Background(), max(w.cfg.heartbeat, (w.cfg.ackWait-w.cfg.heartbeat)/2))
	defer c()
	if err := w.writeClaim(ctx, j, nil); errors.Is(err, record.ErrConflict) {
		j.lease.stop()
	}
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
		"token", j.token, "why", why)
	w.report(j, attempt.Stale, ErrStale, 0)
}
