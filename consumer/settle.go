package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/workq/workq/internal/attempt"
	"github.com/workq/workq/internal/record"
)

// ending is what became of a delivery, as the worker counts it (Stats), measures it
// (workq_jobs_processed_total), logs it and reports it to the test kit (endings).
// Every delivery that reached a handler slot ends as exactly one of them (execute).
type ending int

const (
	endCommitted     ending = iota // committed (acked, unfenced)
	endRetrying                    // failed, put back to run again after its delay
	endDead                        // moved to dead letters
	endHandedBack                  // given back unfinished by a stopping worker
	endReassigned                  // the run's claim was taken by another run: nothing written, not acked
	endCancelled                   // the job was cancelled: run stopped, or dropped unrun
	endUnsettled                   // a server error kept the outcome from being written: the job comes back
	endCopy                        // a copy or repeat of an enqueue that ended: ended without running
	endWatched                     // another run holds the job: put back for the rest of its lease
	endBusy                        // another enqueue of the id is live: put back until it ends
	endEarly                       // its retry time has not come: put back until then
	endUniqueDropped               // its unique key is held by another job: cancelled unrun
)

// endingSpec is what the worker does for an ending: its name (the one vocabulary:
// the outcome label of workq_jobs_processed_total, a span's workq.outcome, the
// "ending" of its log line; each Stats field says which name it counts), the Stats
// counter it adds to, the log line (empty: none; %s is the job id) and its level, and
// the outcome the test kit gets (0: none; the kit hears of runs only).
type endingSpec struct {
	name    string
	counter func(*counters) *atomic.Uint64
	log     string
	level   slog.Level
	report  attempt.Outcome
}

// endings is the one table of what each ending counts, logs and reports.
var endings = [...]endingSpec{
	endCommitted: {name: "committed", counter: func(c *counters) *atomic.Uint64 { return &c.committed }, report: attempt.Committed},
	endRetrying: {name: "retried", counter: func(c *counters) *atomic.Uint64 { return &c.retried },
		log: "job %s failed; it will be retried", level: slog.LevelInfo, report: attempt.Retrying},
	endDead: {name: "dead", counter: func(c *counters) *atomic.Uint64 { return &c.dead },
		log: "job %s moved to dead letters", level: slog.LevelWarn, report: attempt.Dead},
	endHandedBack: {name: "handed_back", counter: func(c *counters) *atomic.Uint64 { return &c.handedBack }, report: attempt.HandedBack},
	endReassigned: {name: "reassigned", counter: func(c *counters) *atomic.Uint64 { return &c.reassigned },
		log: "job %s was reassigned", level: slog.LevelWarn, report: attempt.Reassigned},
	endCancelled: {name: "cancelled", counter: func(c *counters) *atomic.Uint64 { return &c.cancelled },
		log: "job %s was cancelled", level: slog.LevelInfo, report: attempt.Cancelled},
	endUnsettled: {name: "failed", counter: func(c *counters) *atomic.Uint64 { return &c.errors },
		log: "job %s: outcome not written; the job will be redelivered", level: slog.LevelWarn, report: attempt.Unsettled},
	endCopy:    {name: "already_ended", counter: func(c *counters) *atomic.Uint64 { return &c.alreadyDone }},
	endWatched: {name: "watched", counter: func(c *counters) *atomic.Uint64 { return &c.watched }},
	endBusy:    {name: "busy", counter: func(c *counters) *atomic.Uint64 { return &c.busy }},
	endEarly:   {name: "early", counter: func(c *counters) *atomic.Uint64 { return &c.early }},
	endUniqueDropped: {name: "unique_dropped", counter: func(c *counters) *atomic.Uint64 { return &c.uniqueDropped },
		log: "job %s dropped: its unique key is held by another job", level: slog.LevelWarn},
}

// ended counts, measures, logs and reports that j's delivery ended as e, with err
// (the handler's error, or why) and, for a retry, the delay; args are more log
// attributes. Only execute calls it, once a delivery.
func (w *Worker) ended(j *Job, e ending, err error, delay time.Duration, args ...any) {
	spec := endings[e]
	if j.span != nil {
		if e == endRetrying {
			j.spanEvent("retry scheduled", "delay", delay, "of", j.maxAttempts)
		}
		j.endSpan(spec.name, err)
	}
	spec.counter(&w.stats).Add(1)
	j.metrics.processed[e].Inc()
	if spec.log != "" {
		level := spec.level
		attrs := append([]any{"job", j.id, "attempt", j.attempt, "ending", spec.name}, args...)
		if err != nil {
			attrs = append(attrs, "err", firstLine(err))
		}
		if e == endRetrying {
			attrs = append(attrs, "of", j.maxAttempts, "in", delay.Round(time.Millisecond))
		}
		if p := (*panicError)(nil); errors.As(err, &p) {
			// A panic is a bug in the handler: at error level, with where it happened.
			level = max(level, slog.LevelError)
			attrs = append(attrs, "stack", string(p.stack))
		}
		w.log.Log(context.Background(), level, fmt.Sprintf(spec.log, j.id), attrs...)
	}
	if spec.report != 0 {
		w.report(j, spec.report, err, delay)
	}
}

// plan is what ending one delivery takes, decided before any of it is done (the
// planners in plan.go are pure but for the reads their facts need); execute carries
// it out, in this order.
type plan struct {
	write  record.State // the final record written (writeOutcome); "": none
	unrun  bool         // the claim's attempt did not run: the record gives it back, and no failure joins its history
	dead   bool         // the dead letter is published
	unique bool         // the job's unique key is released
	ending ending       // counted, measured, logged and reported (ended)
	tell   bool         // what waits for the job's end is told (its record after the write, or told)
	told   *record.Record
	msg    msgAction     // then the message is acked, put back, terminated or left
	delay  time.Duration // msgNak: when the message comes back (a retry's delay)
	reason error         // the handler's error, why the job died or was dropped, or what failed
	args   []any         // more log attributes
	alert  string        // a line logged at error level before the ending's own: what went wrong that is no handler's doing
}

// execute ends j's delivery as p says. It is the one place that does so: the only
// caller of writeOutcome (the final record), publishDead (the dead letter) and ended
// (the counts, metrics, log line and report), and, through Job.settle, of the ack, nak
// or termination. A step that fails ends the delivery by the plan refused gives
// instead: a record write refused because the claim moved (the job was taken over or
// cancelled), or a server error, which leaves the job to come back.
func (w *Worker) execute(ctx context.Context, j *Job, p plan) {
	if p.write != "" {
		if err := w.writeOutcome(ctx, j, p); err != nil {
			w.execute(ctx, j, w.refused(ctx, j, p, err))
			return
		}
		if p.write == record.Done && j.fenced {
			j.spanEvent("commit", "token", j.token)
		}
	}
	if p.dead {
		if err := w.publishDead(ctx, j, p.reason); err != nil {
			w.execute(ctx, j, unsettled("dead letter", err, w.cfg.backoff(1)))
			return
		}
		if p.ending == endDead {
			j.spanEvent("dead letter", "attempts", j.attempt)
		}
	}
	if p.unique {
		w.releaseUnique(ctx, j)
	}
	if p.alert != "" {
		w.log.Error(p.alert, "job", j.id, "sequence", j.md.Sequence.Stream, "delivery", j.md.NumDelivered, "err", p.reason)
	}
	w.ended(j, p.ending, p.reason, p.delay, p.args...)
	if p.tell {
		rec := p.told
		if rec == nil {
			rec = j.task()
		}
		if !w.tellDependents(ctx, j, rec) {
			// Its next delivery finds the record ended and tells them then.
			j.settle(msgNak, w.cfg.backoff(1))
			return
		}
	}
	j.settle(p.msg, p.delay)
}

// writeOutcome writes j's final record as p says: by compare-and-set over the run's
// claim (a commit with the tasks its run added, in one atomic batch with them), or,
// unfenced, put best effort (a lost write only makes Status less precise). It is the
// only function that writes a delivery's final record.
func (w *Worker) writeOutcome(ctx context.Context, j *Job, p plan) error {
	if !j.fenced {
		w.putRecord(ctx, j, p.write, p.reason, p.delay)
		return nil
	}
	if p.write == record.Done && len(j.added) > 0 {
		return w.commitWithTasks(ctx, j)
	}
	return w.update(ctx, j, func(next *record.Record) { outcomeRecord(next, j, p, time.Now()) })
}

// outcomeRecord makes next, a copy of j's claim, the record p writes at now.
func outcomeRecord(next *record.Record, j *Job, p plan, now time.Time) {
	next.State = p.write
	switch p.write {
	case record.Done:
		next.Result, next.FinishedAt, next.RetryAt = j.result, now, time.Time{}
	case record.Retrying:
		next.RetryAt = now.Add(p.delay)
		failed(next, next.Attempt, p.reason)
	case record.Queued: // handed back: the attempt is not counted
		next.Attempt = max(0, next.Attempt-1)
	case record.Dead, record.Cancelled:
		next.FinishedAt, next.RetryAt = now, time.Time{}
		switch {
		case p.unrun:
			next.Attempt, next.StartedAt = max(0, next.Attempt-1), time.Time{}
			next.LastError = recordError(p.reason.Error()) // no attempt failed: not in the history
		default:
			failed(next, next.Attempt, p.reason)
		}
	}
}

// settle carries out a run's decision (plan.go: planRun): a fenced run's in the
// background, an unfenced one's on its handler slot.
func (w *Worker) settle(ctx context.Context, j *Job, d decision) {
	w.execute(ctx, j, w.planRun(ctx, j, d))
}
