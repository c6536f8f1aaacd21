package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/record"
)

// The plans of a delivery's endings, one planner per kind of exit: a claim's verdict
// (planClaim), a run's decision (planRun), a job that dies (deadPlan), a claim that
// was lost (lostPlan), a write that failed (refused) and a server error (unsettled).
// execute (settle.go) carries each out.

// planClaim is how a delivery whose claim says it may not run (any verdict but runIt)
// ends: j.claim is the record the claim read.
func (w *Worker) planClaim(j *Job, v verdict) plan {
	switch v {
	case repeated:
		// Another enqueue holds the record, and its dependents are its own.
		return plan{ending: endCopy, msg: msgAck}
	case alreadyDone:
		return plan{ending: endCopy, tell: true, msg: msgAck}
	case cancelled:
		return plan{ending: endCancelled, reason: cancelledError(j), unique: true, tell: true, msg: msgTerm, args: []any{"run", "dropped before it ran"}}
	case alreadyDead:
		if j.claim.Sequence != j.md.Sequence.Stream {
			// Another copy of the enqueue that died: its own message publishes the
			// dead letter before it is terminated.
			return plan{ending: endCopy, tell: true, msg: msgTerm}
		}
		// The enqueue's own message, whose delivery that wrote the record dead did
		// not finish: the dead letter (the same message id: published once).
		return plan{ending: endCopy, dead: true, reason: errors.New(j.claim.LastError), tell: true, msg: msgTerm}
	case watched:
		// Put back, not kept: the server hands it to any worker once the holder's
		// lease would have run out, or after watchPoll, whichever comes first.
		return plan{ending: endWatched, msg: msgNak, delay: min(j.retryIn, watchPoll)}
	case busy:
		return plan{ending: endBusy, msg: msgNak, delay: j.retryIn}
	case early:
		return plan{ending: endEarly, msg: msgNak, delay: j.retryIn}
	case unreadable:
		p := w.deadPlan(j, fmt.Errorf("job did not run: %w", j.unreadable))
		p.alert = fmt.Sprintf("job %s: the value at its key is not its record; moving the job to dead letters without running it", j.id)
		return p
	case exhausted:
		return w.deadPlan(j, fmt.Errorf("%w: %d attempts (of %d allowed) did not finish: the worker died, stalled or was cut off while running the job",
			ErrExhausted, j.attempt, j.maxAttempts))
	}
	panic(fmt.Sprintf("consumer: no plan for verdict %d", v))
}

// planRun is how a run ends, as decide decided: the final record (fenced; unfenced,
// best effort and only where Status would otherwise mislead), then the message.
func (w *Worker) planRun(ctx context.Context, j *Job, d decision) plan {
	switch d.outcome {
	case lostIt:
		return w.lostPlan(ctx, j, d.reason, "handler cancelled")
	case commitIt:
		if j.fenced {
			if err := w.checkResult(j); err != nil {
				// It could never be committed: it would run again and again.
				return w.deadPlan(j, err)
			}
			return plan{write: record.Done, unique: true, ending: endCommitted, tell: true, msg: msgAck}
		}
		p := plan{unique: true, ending: endCommitted, msg: msgAck}
		if j.md.NumDelivered > 1 {
			p.write = record.Done // a retried job has a record saying it failed
		}
		return p
	case giveItBack:
		p := plan{ending: endHandedBack, msg: msgNak}
		if j.fenced {
			p.write = record.Queued
		}
		return p
	case retryIt:
		return plan{write: record.Retrying, ending: endRetrying, reason: d.reason, msg: msgNak, delay: d.delay}
	}
	return w.deadPlan(j, d.reason)
}

// deadPlan is how j dies with reason: its record says dead (j.unrun: without a
// counted attempt), its dead letter is published, its unique key released, what
// waits for it told, and its message terminated.
func (w *Worker) deadPlan(j *Job, reason error) plan {
	return plan{write: record.Dead, unrun: j.unrun, dead: true, unique: true, ending: endDead, reason: reason, tell: true, msg: msgTerm}
}

// lostPlan is how a run whose claim was lost ends, as its cause (or the record, when
// cause does not say) tells: a cancelled job is dropped, any other is left to the
// delivery that took it over.
func (w *Worker) lostPlan(ctx context.Context, j *Job, cause error, why string) plan {
	if j.fenced && !errors.Is(cause, ErrCancelled) {
		rctx, c := w.writeContext(ctx)
		cause = w.lostCause(rctx, j)
		c()
	}
	if !errors.Is(cause, ErrCancelled) {
		// It does not ack: the job belongs to the new owner.
		return plan{ending: endReassigned, reason: ErrStale, args: []any{"token", j.token, "why", why}}
	}
	p := plan{ending: endCancelled, reason: cancelledError(j), unique: true, msg: msgTerm, args: []any{"run", "stopped"}}
	if t := j.task(); t != nil {
		// The run has ended (its handler returned): what waits for the job — the
		// next job of its sequence, a workflow task's dependents — is told now,
		// before the message goes. The cancel of a running job leaves that to this
		// settle (telling then would start them beside the run), or, if this worker
		// dies first, to the message's next delivery.
		c := *t
		c.State = record.Cancelled
		p.tell, p.told = true, &c
	}
	return p
}

// refused is how a delivery ends whose plan p's record write failed with err: a
// commit whose added task exists dies; a conflict means the claim was lost; anything
// else leaves the job to be redelivered.
func (w *Worker) refused(ctx context.Context, j *Job, p plan, err error) plan {
	step := stepOf(p.write)
	switch {
	case errors.Is(err, errTaskExists):
		return w.deadPlan(j, Permanent(err))
	case errors.Is(err, record.ErrConflict):
		return w.lostPlan(ctx, j, nil, step+" refused")
	}
	return unsettled(step, err, 0)
}

// stepOf names the write of a final record in state s, for the log of its failure.
func stepOf(s record.State) string {
	switch s {
	case record.Done:
		return "commit"
	case record.Retrying:
		return "record retry"
	case record.Queued:
		return "hand back"
	case record.Dead:
		return "dead-letter"
	}
	return "cancel"
}

// unsettled is how a delivery ends that a server error kept from its outcome: put
// back after delay, or, with none, left to come back after AckWait.
func unsettled(step string, err error, delay time.Duration) plan {
	p := plan{ending: endUnsettled, reason: err, args: []any{"step", step}}
	if delay > 0 {
		p.msg, p.delay = msgNak, delay
	}
	return p
}
