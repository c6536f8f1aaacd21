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

// lostCause is why j lost its claim: ErrCancelled if its record says the cancel was
// written over this run's claim, else ErrStale. A run whose claim another run took
// over before the cancel (it froze past its lease, say) lost it to that run: that run
// is the one the cancel stops, and its end, not this one's, releases what waits for
// the job (a sequence's next job), which must not start while it runs. It reads the
// record, on this rare path only; a read that fails says ErrStale, and the job is
// settled as reassigned.
func (w *Worker) lostCause(ctx context.Context, j *Job) error {
	rec, err := w.records.Get(ctx, j.id)
	switch {
	case err == nil && isCancelled(j, rec) && rec.Run == j.run:
		return cancelledError(j)
	case errors.Is(err, record.ErrCorrupt):
		// Something that is not this job's record was written over the claim: the
		// claim is gone as surely as if another delivery had taken it.
		return fmt.Errorf("job %s: claim overwritten: %w: %w", j.id, err, ErrStale)
	}
	return ErrStale
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
