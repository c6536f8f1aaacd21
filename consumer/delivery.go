package consumer

// The life of one delivery, in the order it goes: admitted (process), claimed
// (claimed: the job record decides, see claim.go and docs/delivery.md), run (run),
// decided (decide.go) and ended. Every way it can end is a plan (plan.go), and one
// executor carries plans out (execute, settle.go): the only code that writes the
// final record, publishes a dead letter, counts, logs and reports the ending, and
// acks, naks or terminates the message.

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/wireid"
)

// process handles one delivery on the fenced or unfenced path.
func (w *Worker) process(ctx context.Context, l *lease) {
	md, err := l.msg.Metadata()
	if err != nil {
		w.log.Error("delivery without JetStream metadata; terminating it", "subject", l.msg.Subject(), "err", err)
		_ = l.settle(msgTerm, 0) // no job to count it by
		return
	}
	if md.NumDelivered > 1 {
		w.stats.redelivered.Add(1)
		w.metrics.redeliveries.Inc()
	}
	j := w.newJob(l, md)
	if w.cfg.tracer != nil {
		ctx = w.startSpan(ctx, j)
		// A delivery that is not settled in the background has ended when this
		// returns; one that did not go through ended says so on its span.
		defer func() {
			if !j.settling {
				j.endSpan("not run", nil)
			}
		}()
	}
	if n := len(l.msg.Headers().Get(queue.HeaderKind)); n > queue.MaxKindLen {
		// Any client may set the kind; one this long could not be kept in the record.
		w.reject(ctx, j, fmt.Errorf("%w: kind of %d bytes, longer than %d", ErrMalformed, n, queue.MaxKindLen))
		return
	}
	if n := len(j.enqueue); n > queue.MaxEnqueueLen {
		// Any client may set it too.
		j.enqueue = j.enqueue[:queue.MaxEnqueueLen]
		w.reject(ctx, j, fmt.Errorf("%w: %s of %d bytes, longer than %d", ErrMalformed, queue.HeaderEnqueue, n, queue.MaxEnqueueLen))
		return
	}
	if j.unique != "" {
		// The header carries the key's token (internal/wireid); any client may set it.
		key, ok := wireid.Decode(j.unique)
		if !ok {
			tok := j.unique
			j.unique = "" // no key to hold or release
			w.reject(ctx, j, fmt.Errorf("%w: %s %.40q is no unique key's token", ErrMalformed, queue.HeaderUnique, tok))
			return
		}
		j.unique = key
	}
	release, err := w.limits.acquire(w.gateCtx, j)
	if err != nil {
		if w.gateCtx.Err() != nil {
			w.handBack(l) // stopping while it waited for a limit
			return
		}
		w.execute(ctx, j, unsettled("queue limits", err, w.cfg.backoff(1)))
		return
	}
	defer release()
	if !j.fenced {
		w.processUnfenced(ctx, j)
		return
	}
	w.processFenced(ctx, j)
}

// reject dead-letters a job that cannot be run, without running it.
func (w *Worker) reject(ctx context.Context, j *Job, reason error) {
	if j.fenced {
		// Claimed first, as a run would be, so that a copy of an enqueue that ended
		// ends as it would, and the dead record is written over the record the claim
		// read.
		if !w.claimed(ctx, j) {
			return
		}
		j.unrun, j.attempt = true, max(0, j.attempt-1)
	}
	w.execute(ctx, j, w.deadPlan(j, Permanent(reason)))
}

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
	d := decide(herr, cause, j.attempt, j.maxAttempts, w.cfg.backoff)
	j.settling = true
	w.background(func() {
		w.settle(ctx, j, d)
		j.endSpan("settled", nil) // every settle ends through ended: this is a guard
	})
}

// processUnfenced runs one delivery without claim or commit: at-least-once. It
// decides as a fenced run does (decide), and settles on its handler slot with an ack,
// a nak or a dead letter, writing the record best effort (planRun).
func (w *Worker) processUnfenced(ctx context.Context, j *Job) {
	if j.unique != "" && !w.holdUnique(ctx, j) {
		return
	}
	herr, cause := w.run(ctx, j)
	w.settle(ctx, j, decide(herr, cause, j.attempt, j.maxAttempts, w.cfg.backoff))
}

// claimed claims j and reports whether it may run; a delivery that may not is ended
// here as its verdict says: acked, terminated, dead-lettered or put back.
func (w *Worker) claimed(ctx context.Context, j *Job) bool {
	v, err := w.claimDelivery(ctx, j)
	if err != nil {
		w.claimFailed(j, err)
		return false
	}
	w.claimsWork()
	if v == runIt {
		if j.span != nil {
			j.span.span.Claimed(j.attempt, j.token)
		}
		return true
	}
	w.execute(ctx, j, w.planClaim(j, v))
	return false
}

// watchPoll is how long at most a delivery whose job another run holds is put back
// for: the run it waits for most often ends well within its lease (a copy the server
// sent while the run went on), and the copy should end soon after, not a whole lease
// (30 s at the default AckWait) later. Such deliveries are the rare copies, so the
// reads cost little.
const watchPoll = time.Second

// run calls the handler, its delivery kept alive by its lease, and returns its error
// and the cause of its context's end, if it ended. A fenced run's lease renews the
// claim beside each progress report: a claim taken over by another delivery cancels
// the handler with ErrStale, a cancel of the job with ErrCancelled. An unfenced run's
// lease checks for a cancel only.
func (w *Worker) run(ctx context.Context, j *Job) (err, cause error) {
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if w.cfg.timeout > 0 {
		var c context.CancelFunc
		hctx, c = context.WithTimeoutCause(hctx, w.cfg.timeout, fmt.Errorf("job %s: timeout %s passed", j.id, w.cfg.timeout))
		defer c()
	}
	j.mu.Lock()
	j.cancel = cancel
	j.mu.Unlock()
	if j.fenced {
		j.lease.watch(func() { w.renew(j) })
	} else {
		j.lease.watch(func() { w.checkCancelled(j, cancel) })
	}
	defer j.lease.watch(nil)
	w.stats.started.Add(1)
	start := time.Now()
	if j.md.NumDelivered == 1 {
		j.metrics.observeWait(j.md.Timestamp, start)
	}
	w.metrics.inFlight.Inc()
	err = safeCall(hctx, w.handler, j)
	j.metrics.observeDuration(time.Since(start), j.traceID())
	w.metrics.inFlight.Dec()
	if hctx.Err() != nil {
		cause = context.Cause(hctx)
	}
	return err, cause
}
