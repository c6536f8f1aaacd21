package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
)

// Unique jobs (producer.Unique) carry their key in the Workq-Unique header; the key's
// reservation in the queue's unique bucket names the job that holds it. A worker
// runs such a job only while the job holds its key, and releases the key when the
// job ends. Jobs without the header never touch the bucket.

// maxUniqueTries bounds the compare-and-set rounds over one key: each lost round
// means a producer wrote the key meanwhile.
const maxUniqueTries = 8

// holdUnique makes sure that unique job j holds its key before it runs, and reports
// whether it may run. A free key (released, expired, or its bucket new) is taken;
// a takeover mark on j's key, left by a producer that found j nowhere, is cleared,
// which makes that takeover fail. A key held by another job means that j's enqueue
// was taken over as an orphan (its publish came too late): j is cancelled, never
// run. If the bucket cannot be read the delivery is put back for later.
func (w *Worker) holdUnique(ctx context.Context, j *Job) bool {
	wctx, cancel := w.writeContext(ctx)
	defer cancel()
	holder, err := w.holdKey(wctx, j)
	if err != nil {
		p := unsettled("unique key", err, w.cfg.backoff(1))
		p.args = append(p.args, "unique", j.unique)
		w.execute(ctx, j, p)
		return false
	}
	if holder == "" {
		return true
	}
	reason := fmt.Errorf("unique key %s is held by job %s: this job was stored after its enqueue had been taken over, and never runs", j.unique, holder)
	w.execute(ctx, j, plan{write: record.Cancelled, unrun: true, ending: endUniqueDropped, reason: reason, msg: msgTerm,
		args: []any{"unique", j.unique, "holder", holder}})
	return false
}

// holdKey makes j hold its key and returns "", or returns the job that holds it.
func (w *Worker) holdKey(ctx context.Context, j *Job) (string, error) {
	u, err := w.uniques.Open(ctx, w.js, w.objects)
	if err != nil {
		return "", err
	}
	mine := queue.Reservation{Job: j.id, At: time.Now(), Keep: queue.KeepSeconds(j.uniqueFor)}
	for range maxUniqueTries {
		e, found, err := u.Get(ctx, j.unique)
		var rev uint64
		switch {
		case err != nil:
			return "", err
		case !found:
			rev, err = u.Create(ctx, j.unique, mine)
		case e.Job != j.id:
			return e.Job, nil
		case e.Takeover == "" && e.FinishedAt.IsZero():
			j.uniqueRev = e.Revision
			return "", nil
		default:
			// Clear a takeover mark, or hold again a key this job ended with (a run
			// again of a job that ended: at-least-once).
			rev, err = u.Update(ctx, j.unique, mine, e.Revision)
		}
		if err == nil {
			j.uniqueRev = rev
			return "", nil
		}
		if !jserr.IsConflict(err) {
			return "", err
		}
	}
	return "", fmt.Errorf("unique key %s kept changing", j.unique)
}

// releaseUnique ends unique job j's hold on its key, as it ends (committed, dead):
// the key is released, or, with a keep period, rewritten with the job's end to
// expire after it. A job that ends without having run in this delivery (its
// attempts used up by runs that never finished) releases the key if it still names
// it. Best effort: producers judge a key from the job's record too, so a release
// that fails leaves the key held no longer than the job's keep period (or, for a
// job without a record, the producers' grace).
func (w *Worker) releaseUnique(ctx context.Context, j *Job) {
	if j.unique == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(w.cfg.ackWait, 5*time.Second))
	defer cancel()
	u, err := w.uniques.Open(ctx, w.js, w.objects)
	if err == nil && j.uniqueRev == 0 {
		var e queue.UniqueEntry
		var found bool
		e, found, err = u.Get(ctx, j.unique)
		if err == nil && (!found || e.Job != j.id || !e.FinishedAt.IsZero()) {
			return
		}
		j.uniqueRev = e.Revision
	}
	if err == nil {
		if j.uniqueFor > 0 {
			now := time.Now()
			r := queue.Reservation{Job: j.id, At: now, Keep: queue.KeepSeconds(j.uniqueFor), FinishedAt: now}
			err = u.Finish(ctx, j.unique, r, j.uniqueRev, j.uniqueFor)
		} else {
			err = u.Release(ctx, j.unique, j.uniqueRev)
		}
	}
	if err != nil {
		w.log.Debug("unique key not released", "job", j.id, "unique", j.unique, "err", err)
		return
	}
	j.uniqueRev = 0
}
