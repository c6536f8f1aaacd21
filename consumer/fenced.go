package consumer

import (
	"context"
	"errors"
	"fmt"

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
		j.loseLocked(w.lostCause(ctx, j)) // settled by lostPlan
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
