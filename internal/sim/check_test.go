package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/record"
)

// check holds the history to the invariants of docs/delivery.md, on the records as
// the server stored them and the runs as the handlers saw them:
//
//   - liveness: every job ended (done or dead), and the stream emptied, within the
//     stated bound after the faults stopped;
//   - every run is a claim: a run of attempt a of an enqueue has a claim revision of
//     that enqueue and attempt, and no two claims of an enqueue share an attempt
//     (attempts count claims exactly);
//   - no run after the end: no claim of an enqueue comes after a terminal revision of
//     it;
//   - one result: the done revisions of an enqueue name one run;
//   - takeover only after a lease: a claim over another run's running revision of
//     the same enqueue is written at least that revision's lease after it;
//   - a workflow's task is claimed only after every parent's record ended;
//   - a cancelled enqueue never commits after its cancel;
//   - a sequence's jobs never run at once: the runs of two jobs of one key do not
//     overlap, a run counting from its start until it ends, its claim is written
//     over by another run, or its record goes a lease without a write.
func (w *world) check(ended, bound time.Duration) error {
	var errs []error
	if w.hist.gaps > 0 {
		errs = append(errs, fmt.Errorf("the history missed %d revisions of the records: it cannot be checked", w.hist.gaps))
	}
	if ended > bound {
		errs = append(errs, fmt.Errorf("liveness: the jobs had not all ended %v after the faults stopped", bound))
	}
	h := w.hist
	h.mu.Lock()
	defer h.mu.Unlock()

	type claimKey struct {
		enqueue string
		attempt int
	}
	claims := map[string]map[claimKey]revision{} // by job
	for id, revs := range h.revs {
		claims[id] = map[claimKey]revision{}
		terminal := map[string]uint64{} // enqueue → its first terminal revision
		doneRuns := map[string]string{}
		cancelled := map[string]uint64{} // enqueue → its cancel's revision
		for i, r := range revs {
			if r.deleted {
				continue
			}
			if r.state.Terminal() && terminal[r.enqueue] == 0 {
				terminal[r.enqueue] = r.rev
			}
			if r.state == record.Done && cancelled[r.enqueue] != 0 {
				errs = append(errs, fmt.Errorf("%s: enqueue %s committed (rev %d) after its cancel (rev %d)", id, r.enqueue, r.rev, cancelled[r.enqueue]))
			}
			if r.state == record.Cancelled && cancelled[r.enqueue] == 0 {
				cancelled[r.enqueue] = r.rev
			}
			if r.state == record.Done {
				if prev, ok := doneRuns[r.enqueue]; ok && prev != r.run {
					errs = append(errs, fmt.Errorf("%s: enqueue %s committed by runs %s and %s", id, r.enqueue, prev, r.run))
				}
				doneRuns[r.enqueue] = r.run
			}
			if r.state != record.Running {
				continue
			}
			k := claimKey{r.enqueue, r.attempt}
			if c, ok := claims[id][k]; ok && c.run != r.run {
				errs = append(errs, fmt.Errorf("%s: two claims of attempt %d of enqueue %s (runs %s, %s)", id, r.attempt, r.enqueue, c.run, r.run))
			}
			if _, ok := claims[id][k]; !ok {
				claims[id][k] = r
				if t := terminal[r.enqueue]; t != 0 && t < r.rev {
					errs = append(errs, fmt.Errorf("%s: claim of attempt %d (rev %d) after enqueue %s ended (rev %d)", id, r.attempt, r.rev, r.enqueue, t))
				}
			}
			if i > 0 {
				p := revs[i-1]
				if !p.deleted && p.state == record.Running && p.enqueue == r.enqueue && p.run != r.run && r.at.Sub(p.at) < p.lease {
					errs = append(errs, fmt.Errorf("%s: run %s took over run %s %v after its last write, within its lease %v", id, r.run, p.run, r.at.Sub(p.at), p.lease))
				}
			}
		}
	}
	// Every run is a claim.
	type span struct {
		job        string
		start, end time.Time
	}
	byKey := map[string][]span{}
	for _, r := range h.runs {
		c, ok := claims[r.job][claimKey{r.enqueue, r.attempt}]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: run of attempt %d of enqueue %s on %s has no claim", r.job, r.attempt, r.enqueue, r.worker))
			continue
		}
		plan := w.plan(r.job)
		for _, parent := range plan.parents {
			if ended := firstTerminal(h.revs[parent]); ended == 0 || ended > c.rev {
				errs = append(errs, fmt.Errorf("%s: claimed (rev %d) before its parent %s ended (rev %d)", r.job, c.rev, parent, ended))
			}
		}
		if plan.sequence == "" {
			continue
		}
		end := r.ended
		if end.IsZero() {
			end = time.Now()
		}
		// The run counts until its claim is written over by another run, or its
		// record goes a lease without a write (a frozen worker's run ended by its
		// lease, as the protocol has it: what waits for it may start then).
		last := c.at
		for _, rv := range h.revs[r.job] {
			if rv.rev <= c.rev {
				continue
			}
			if rv.at.Sub(last) >= c.lease {
				break
			}
			if rv.run != c.run {
				end = minTime(end, rv.at)
				break
			}
			last = rv.at
		}
		end = minTime(end, last.Add(c.lease))
		byKey[plan.sequence] = append(byKey[plan.sequence], span{r.job, r.started, end})
	}
	for key, spans := range byKey {
		for i, a := range spans {
			for _, b := range spans[i+1:] {
				if a.job != b.job && a.start.Before(b.end) && b.start.Before(a.end) {
					errs = append(errs, fmt.Errorf("sequence %s: %s and %s ran at once (%v–%v, %v–%v)", key, a.job, b.job,
						a.start.Sub(h.start), a.end.Sub(h.start), b.start.Sub(h.start), b.end.Sub(h.start)))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// firstTerminal is the revision at which revs first says terminal; 0 if never.
func firstTerminal(revs []revision) uint64 {
	for _, r := range revs {
		if !r.deleted && r.state.Terminal() {
			return r.rev
		}
	}
	return 0
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
