package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/mutant"
	"github.com/workq/workq/internal/record"
)

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
	j.applyProgress(&next)
	if change != nil {
		change(&next)
	}
	var err error
	if change != nil && mutant.On(mutant.UnfencedCommit) {
		err = w.records.Put(ctx, &next)
	} else {
		err = w.cas(ctx, &next, j.claim.Revision)
	}
	switch {
	case err == nil:
		j.claim, j.progress = &next, nil
	case errors.Is(err, record.ErrConflict):
		j.loseLocked(w.lostCause(ctx, j)) // settled by lostClaim
	}
	return err
}

// renew renews a running job's claim, beside a progress report: the same record
// written again, which moves its revision, so that other workers see the claim alive
// (a claim whose revision stands unchanged for its lease is taken over). A claim found
// lost cancels the handler (writeClaim) and ends the renewals. The progress reports
// end too when another run took the job (the delivery is that run's now); after a
// cancel they go on until the run has settled, so that the message is not sent again
// while the handler still runs: what waits for the job (the next job of its sequence)
// is told when it returns. It gets up to half of what is left of AckWait after a
// heartbeat, and never less than the interval.
func (w *Worker) renew(j *Job) {
	ctx, c := context.WithTimeout(context.Background(), max(w.cfg.heartbeat, (w.cfg.ackWait-w.cfg.heartbeat)/2))
	defer c()
	if err := w.writeClaim(ctx, j, nil); errors.Is(err, record.ErrConflict) {
		if j.cancelledRun() {
			j.lease.watch(nil)
			return
		}
		j.lease.stop()
	}
}

// commit writes the job done with its result, fenced on the claim, then acks. A
// result too large for the record dead-letters the job instead: it could never be
// committed, and the job would run again and again.
func (w *Worker) commit(ctx context.Context, j *Job) {
	if err := w.checkResult(j); err != nil {
		w.deadLetter(ctx, j, err, true)
		return
	}
	if len(j.added) > 0 {
		w.commitWithTasks(ctx, j)
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
	j.spanEvent("commit", "token", j.token)
	w.ended(j, endCommitted, nil, 0)
	if w.tellDependents(ctx, j, j.task()) {
		w.ack(j)
	}
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

// retry records a failed run and puts the job back to run again after delay.
func (w *Worker) retry(ctx context.Context, j *Job, herr error, delay time.Duration) {
	err := w.update(ctx, j, func(next *record.Record) {
		next.State, next.RetryAt = record.Retrying, time.Now().Add(delay)
		failed(next, next.Attempt, herr)
	})
	if err != nil {
		w.outcomeFailed(j, "record retry", err)
		return
	}
	w.ended(j, endRetrying, herr, delay)
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
	w.ended(j, endHandedBack, nil, 0)
	j.nak(0)
}

// outcomeFailed handles a write over the claim that did not go through: a conflict
// means the job was reassigned; anything else leaves it to be redelivered.
func (w *Worker) outcomeFailed(j *Job, what string, err error) {
	if errors.Is(err, record.ErrConflict) {
		w.lostClaim(j, nil, what+" refused")
		return
	}
	j.lease.stop()
	w.ended(j, endUnsettled, err, 0, "step", what)
}

// reassigned ends a run whose claim another delivery took over. It does not ack: the
// job belongs to the new owner.
func (w *Worker) reassigned(j *Job, why string) {
	j.lease.stop()
	w.ended(j, endReassigned, ErrStale, 0, "token", j.token, "why", why)
}
