package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/workq/workq/internal/record"
)

// cancelledError is the cause a cancelled run of j ends with.
func cancelledError(j *Job) error {
	return fmt.Errorf("job %s: %w (%w: it may not commit)", j.id, ErrCancelled, ErrStale)
}

// isCancelled reports whether rec says that j's enqueue was cancelled. The record of
// another enqueue with the same id does not count.
func isCancelled(j *Job, rec *record.Record) bool {
	return rec.State == record.Cancelled && sameEnqueue(j, rec)
}

// lostCause is why j lost its claim: ErrCancelled if its record says it was cancelled,
// else ErrStale. It reads the record, on this rare path only; a read that fails says
// ErrStale, and the job is settled as reassigned.
func (w *Worker) lostCause(ctx context.Context, j *Job) error {
	rec, err := w.records.Get(ctx, j.id)
	switch {
	case err == nil && isCancelled(j, rec):
		return cancelledError(j)
	case errors.Is(err, record.ErrCorrupt):
		// Something that is not this job's record was written over the claim: the
		// claim is gone as surely as if another delivery had taken it.
		return fmt.Errorf("job %s: claim overwritten: %w: %w", j.id, err, ErrStale)
	}
	return ErrStale
}

// lostClaim settles a fenced run whose claim was lost, as its cause (or the record,
// when cause does not say) tells: a cancelled job is dropped, any other is left to
// the delivery that took it over.
func (w *Worker) lostClaim(j *Job, cause error, why string) {
	if !errors.Is(cause, ErrCancelled) {
		ctx, c := w.writeContext(context.Background())
		cause = w.lostCause(ctx, j)
		c()
	}
	if errors.Is(cause, ErrCancelled) {
		if t := j.task(); t != nil {
			// The run has ended (its handler returned): what waits for the job — the
			// next job of its sequence, a workflow task's dependents — is told now,
			// before the message goes. The cancel of a running job leaves that to
			// this settle (telling then would start them beside the run), or, if this
			// worker dies first, to the message's next delivery.
			c := *t
			c.State = record.Cancelled
			if !w.tellDependents(context.Background(), j, &c) {
				return
			}
		}
		w.dropCancelled(j, "stopped")
		return
	}
	w.reassigned(j, why)
}

// dropCancelled ends a delivery of a cancelled job: it is terminated, so that the
// server does not deliver it again (the cancel removed the message already, unless it
// could not, or the job was running and something waits for its end), and counted;
// how says whether a run was stopped or never started.
func (w *Worker) dropCancelled(j *Job, how string) {
	w.releaseUnique(context.Background(), j) // tidiness: producers see the cancelled record anyway
	j.lease.stop()
	w.ended(j, endCancelled, cancelledError(j), 0, "run", how)
	if err := j.msg.Term(); err != nil {
		w.log.Debug("terminate a cancelled job", "job", j.id, "err", err)
	}
}

// checkCancelled is a running unfenced job's check beside each progress report: an
// unfenced run holds no claim, so it reads the record only to see a cancel.
func (w *Worker) checkCancelled(j *Job, cancel context.CancelCauseFunc) {
	ctx, c := context.WithTimeout(context.Background(), max(w.cfg.heartbeat, (w.cfg.ackWait-w.cfg.heartbeat)/2))
	defer c()
	if rec, err := w.records.Get(ctx, j.id); err == nil && isCancelled(j, rec) {
		cancel(cancelledError(j))
	}
}
