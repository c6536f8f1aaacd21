package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/internal/jserr"
)

// A claim that could not be made — its write refused, its read failed, the server
// unreachable — runs nothing: without a claim no handler may start. The delivery is
// put back, and it must neither come back at once for ever nor pass unseen.

// claimBackoff is how long a delivery whose claim failed waits before it comes back:
// it doubles with each delivery of the job, from 250ms up to a minute. The delivery
// count only paces the tries here; nothing the protocol decides rests on it.
func claimBackoff(delivered uint64) time.Duration {
	const first, most = 250 * time.Millisecond, time.Minute
	n := min(max(delivered, 1)-1, 16)
	return min(first<<n, most)
}

// claimFailed ends a delivery whose claim failed with err: counted and logged as an
// unsettled delivery, put back after claimBackoff. An error that a try again would
// meet again (a write the server refuses, not a timeout) makes the worker unhealthy
// with it (Health) until a claim works.
func (w *Worker) claimFailed(j *Job, err error) {
	if !jserr.Transient(err) {
		err := fmt.Errorf("claiming jobs: job %s: %w", j.id, err)
		if prev := w.claims.Swap(&err); prev == nil || (*prev).Error() != err.Error() {
			w.log.Error("claims fail: jobs are put back and tried again later", "err", err)
		}
	}
	w.execute(context.Background(), j, unsettled("claim", err, claimBackoff(j.md.NumDelivered)))
}

// claimsWork records a claim that was made (or decided without an error).
func (w *Worker) claimsWork() {
	if w.claims.Load() == nil {
		return
	}
	if prev := w.claims.Swap(nil); prev != nil {
		w.log.Info("claims work again", "after", (*prev).Error())
	}
}
