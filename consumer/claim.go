package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
)

// verdict is what a claim decided to do with a delivery.
type verdict int

const (
	runIt       verdict = iota // claimed: run the handler
	alreadyDone                // committed before; only the ack was lost: ack
	alreadyDead                // dead-lettered before; make sure the copy exists, terminate
	stale                      // a newer delivery claimed the job: do nothing
	busy                       // another live message has this job id: put back for later
	exhausted                  // the allowed attempts were used by runs that never finished: dead-letter
	early                      // the job's retry time has not come (its worker died before putting it back): put back until then
	heldOld                    // a run through a replaced consumer may still hold the job: leave it to that run's heartbeats
	cancelled                  // the job was cancelled: drop it without running
	unreadable                 // the value at the job's key is not its record: dead-letter without running (see claimUnreadable)
)

// retryTolerance is how early before its record's retry time a redelivery may run
// anyway: clocks of the worker that failed the job and of this one may differ a little.
const retryTolerance = 100 * time.Millisecond

// Fencing orders the deliveries of a job by (consumer incarnation, delivery count):
// the record names the last delivery accounted for, and a delivery at or below it is
// stale. Attempts count every delivery that may have run: deliveries of the same
// incarnation between the record's and this one left no trace — a first attempt whose
// worker died before its lazy claim, a worker cut off before it wrote anything — and
// each counts. Deliveries handed back unstarted are written to the record, so they do
// not count.

// claimDelivery decides what this delivery does. A first delivery that is provably
// this worker's — the server cannot have redelivered it yet (lease.current) and no
// earlier consumer incarnation can have delivered it — needs no read: no other run of
// the job can exist, so it may run at once and write its claim after ClaimDelay (or
// at commit, which is then a create that fails if any later delivery has claimed the
// job meanwhile). Every other delivery, and a first delivery of a message this worker
// finished lately (a twin: see twins.go), reads the record and claims before it runs: a
// delivery that waited in a frozen worker's buffer past AckWait may belong to a job
// another worker has run and committed since.
//
// Its reads and writes are bounded by a write context (writeContext), made only when
// it talks to the server: a lazy first claim, the common case, needs none.
func (w *Worker) claimDelivery(ctx context.Context, j *Job) (verdict, error) {
	// A fired job (delayed or periodic) reads its record first too: the server may
	// have fired it twice across a change of stream leader (both copies carry the
	// same id, which the stream's dedup does not see), or it may have been cancelled
	// as it fired.
	if j.md.NumDelivered != 1 || !j.lease.current() || j.md.Sequence.Stream <= j.lease.inc.FirstSeq || j.twin || !j.scheduledAt.IsZero() {
		wctx, cancel := w.writeContext(ctx)
		defer cancel()
		return w.claim(wctx, j)
	}
	j.claim = w.fresh(j, 1)
	if w.cfg.claimDelay > 0 {
		return runIt, nil
	}
	ctx, cancel := w.writeContext(ctx)
	defer cancel()
	_, err := j.ensureClaimed(ctx)
	if errors.Is(err, ErrStale) {
		// The id has a record already: another message with this id, most likely.
		j.claim, j.lost = nil, false
		return w.claim(ctx, j)
	}
	return runIt, err
}

// sameFiring reports whether prev, the record of another message with j's id, is
// the record of the same firing: the same delayed job's due time, or the same
// periodic schedule's firing time.
func sameFiring(j *Job, prev *record.Record) bool {
	return !j.scheduledAt.IsZero() && prev.ScheduledAt.Equal(j.scheduledAt) && prev.Schedule == j.schedule
}

// fresh is the claim this delivery writes as the given attempt. Its Revision is 0
// until it is written.
func (w *Worker) fresh(j *Job, attempt int) *record.Record {
	return &record.Record{
		ID: j.id, Queue: w.names.Queue, Kind: j.kind, State: record.Running, Attempt: attempt,
		MaxAttempts: j.maxAttempts, Delivery: j.md.NumDelivered, Epoch: j.lease.inc.Epoch,
		Sequence: j.md.Sequence.Stream, Worker: &w.identity, EnqueuedAt: j.md.Timestamp, StartedAt: time.Now(),
		ScheduledAt: j.scheduledAt, Schedule: j.schedule,
	}
}

// claim reads and writes the job record to decide what this delivery does. On runIt
// j.claim is the written claim (its revision is the fencing token); on exhausted and
// alreadyDead it is the record found (on exhausted with no record, the unwritten claim
// this delivery would have made); on early, j.retryIn is how long to put it back.
func (w *Worker) claim(ctx context.Context, j *Job) (verdict, error) {
	for range 8 {
		prev, err := w.records.Get(ctx, j.id)
		var next *record.Record
		var prevRev uint64
		v := runIt
		switch {
		case errors.Is(err, record.ErrNotFound):
			// Every earlier delivery of this incarnation left no trace, and each may
			// have run: this is attempt NumDelivered. Past the limit, the job ends as a
			// record-holding job does (follow): its untraced runs used the attempts.
			next = w.fresh(j, int(j.md.NumDelivered))
			if next.Attempt > j.maxAttempts {
				// The record it ends with counts the attempts used, not this one.
				next.Attempt, next.StartedAt = next.Attempt-1, time.Time{}
				j.claim, j.attempt = next, next.Attempt
				return exhausted, nil
			}
		case errors.Is(err, record.ErrCorrupt):
			return w.claimUnreadable(j, err), nil
		case err != nil:
			return 0, err
		case w.forgottenDuplicate(j, prev):
			return alreadyDone, nil
		case isCancelled(j, prev), prev.State == record.Cancelled && prev.Sequence != j.md.Sequence.Stream && sameFiring(j, prev):
			// Cancelled: this message, or the delayed job the server fired as it was
			// cancelled.
			return cancelled, nil
		case prev.Sequence != j.md.Sequence.Stream && prev.State.Terminal() && sameFiring(j, prev):
			// Another copy of a firing that has ended (a new stream leader fired again
			// what the old one fired as it failed), or of a delayed job cancelled while
			// the server fired it: it never runs.
			return alreadyDone, nil
		case prev.Sequence != j.md.Sequence.Stream:
			// The record belongs to another message with the same id: a job enqueued
			// again after the duplicate window, or requeued from dead letters.
			if !prev.State.Terminal() {
				live, err := w.messageLive(ctx, prev.Sequence)
				if err != nil {
					return 0, err
				}
				if live && sameFiring(j, prev) {
					// Another copy of the same firing is live: it runs the firing (and
					// retries it, or dead-letters it); this copy never runs.
					return alreadyDone, nil
				}
				if live {
					return busy, nil
				}
			}
			next, prevRev = w.fresh(j, int(j.md.NumDelivered)), prev.Revision
		case prev.State == record.Done:
			return alreadyDone, nil
		case prev.State == record.Dead:
			j.claim = prev
			return alreadyDead, nil
		default:
			if v, next = w.follow(j, prev); next == nil {
				return v, nil
			}
			prevRev = prev.Revision
		}
		err = w.put(ctx, j, next, prevRev)
		if err == nil {
			if v == runIt {
				j.claim = next
			}
			if next.Attempt > 1 {
				w.logRepeat(j, next, prev)
			}
			return v, nil
		}
		if !errors.Is(err, record.ErrConflict) {
			return 0, err
		}
		// Someone wrote the record between our read and write: read it again.
	}
	return 0, fmt.Errorf("job %s: claim kept conflicting", j.id)
}

// forgottenDuplicate reports whether j's message is a second copy of the job that
// prev, the record of an earlier message with the same id, says is done, stored
// within the queue's duplicate window of the first: a copy the server should have
// refused as a duplicate. It lets one through when it restarts: it rebuilds its
// memory of job ids from the messages still in the stream, and a WorkQueue stream no
// longer holds the jobs that were done, so a producer retrying an enqueue whose
// reply was lost in the crash stores those jobs again. Such a copy is acked without
// running (or, when it ran on a lazy first claim, without committing).
//
// Only a copy under the job id as its message id counts: a requeue from dead letters
// publishes under a message id of its own, and means to run the job again.
func (w *Worker) forgottenDuplicate(j *Job, prev *record.Record) bool {
	window := w.objects.Stream.CachedInfo().Config.Duplicates
	return prev.State == record.Done && prev.Sequence < j.md.Sequence.Stream && window > 0 &&
		j.msg.Headers().Get(queue.HeaderID) == j.id &&
		!prev.EnqueuedAt.IsZero() && j.md.Timestamp.Sub(prev.EnqueuedAt) < window
}

// follow decides what delivery j does after prev, the live record of the same message,
// and returns the record to write for it: its claim (runIt), or its accounting (early);
// nil when nothing is written.
func (w *Worker) follow(j *Job, prev *record.Record) (verdict, *record.Record) {
	d, epoch := j.md.NumDelivered, j.lease.inc.Epoch
	untraced := 0
	switch {
	case prev.Epoch > epoch:
		// Claimed through a newer incarnation of the consumer than the one this
		// delivery came through: the worker may not know the new one yet.
		j.lease.src.askRecheck()
		if !w.takeOverAhead(j, prev) {
			return stale, nil
		}
	case prev.Epoch == epoch || prev.Epoch == 0:
		if prev.Delivery >= d {
			if !w.takeOverAhead(j, prev) {
				return stale, nil
			}
		} else {
			untraced = int(d - prev.Delivery - 1)
		}
	case prev.State == record.Running && d == 1:
		// A run of the job through the replaced consumer may still be going. Its
		// heartbeats reach the new consumer (acks match by stream sequence) and keep
		// this delivery from coming back; if it commits, its ack ends the job. If it
		// is dead, the job comes back after AckWait and is claimed then.
		return heldOld, nil
	}
	attempt := prev.Attempt + untraced + 1
	if wait := time.Until(prev.RetryAt); prev.State == record.Retrying && untraced == 0 && wait > retryTolerance {
		// The failed run's worker died between recording the failure and putting the
		// job back with its backoff, so AckWait brought it back early.
		j.retryIn = wait
		next := *prev
		next.Delivery, next.Epoch = d, epoch
		next.LastError = recordError(next.LastError)
		return early, &next
	}
	if attempt > j.maxAttempts {
		j.claim, j.attempt = prev, attempt-1
		return exhausted, nil
	}
	next := w.fresh(j, attempt)
	next.LastError = recordError(prev.LastError) // cut like our own: another client may have written one that would not fit
	return runIt, next
}

// claimUnreadable decides what a delivery does when the value at its job's key is
// not the job's record (record.ErrCorrupt: not JSON, another job's record, fields no
// workq writer makes), as any client that can write to the bucket may leave it: the
// job is dead-lettered without running, its record replaced by a dead record by
// compare-and-set on the revision read. It sets j.claim to the record to write over it
// and returns unreadable.
//
// Not run, because the record is what says whether the job was committed (done, with
// only the ack lost), cancelled, or out of attempts: a worker that cannot read it
// cannot tell, and running the job again could commit a second result, or run a
// cancelled job. Not left alone either: every delivery would find the same value, and
// the job would loop for ever. The dead letter keeps the payload and says what was
// wrong, and the dead record written over the value makes the key readable again, so
// an operator can requeue the job and it runs as a new message would. The attempts it
// counts are the deliveries before this one (the floor: each may have run).
func (w *Worker) claimUnreadable(j *Job, err error) verdict {
	c := w.fresh(j, max(int(j.md.NumDelivered)-1, 0))
	c.StartedAt = time.Time{}
	var ce *record.CorruptError
	if errors.As(err, &ce) {
		c.Revision = ce.Revision // the dead record replaces the value read, and only it
	}
	j.claim, j.attempt, j.unreadable = c, c.Attempt, err
	return unreadable
}

// askRecheck asks the fetch loop to read the consumer's incarnation now.
func (s *source) askRecheck() {
	select {
	case s.recheck <- struct{}{}:
	default:
	}
}

// messageLive reports whether the stream still holds message seq (not acked,
// terminated or purged).
func (w *Worker) messageLive(ctx context.Context, seq uint64) (bool, error) {
	_, err := w.objects.Stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	return err == nil, err
}

// accountHandBack writes a delivery handed back unstarted into the job record, so
// that the next delivery does not count it as an attempt that may have run. Best
// effort: a delivery whose hand-back could not be written counts.
func (w *Worker) accountHandBack(j *Job) {
	ctx, cancel := context.WithTimeout(context.Background(), min(w.cfg.ackWait, 5*time.Second))
	defer cancel()
	d, epoch := j.md.NumDelivered, j.lease.inc.Epoch
	for range 3 {
		prev, err := w.records.Get(ctx, j.id)
		var next record.Record
		var prevRev uint64
		switch {
		case errors.Is(err, record.ErrNotFound):
			next = *w.fresh(j, int(d)-1)
			next.State, next.StartedAt, next.Worker = record.Queued, time.Time{}, nil
		case err != nil, prev.Sequence != j.md.Sequence.Stream, prev.State.Terminal():
			return
		case prev.Epoch == epoch || prev.Epoch == 0:
			if prev.Delivery >= d {
				return
			}
			next, prevRev = *prev, prev.Revision
			next.Attempt += int(d - prev.Delivery - 1)
		case prev.Epoch < epoch:
			next, prevRev = *prev, prev.Revision
		default:
			return
		}
		next.Delivery, next.Epoch = d, epoch
		if prevRev == 0 {
			err = w.records.Create(ctx, &next)
		} else {
			err = w.records.Update(ctx, &next, prevRev)
		}
		if !errors.Is(err, record.ErrConflict) {
			return
		}
	}
}

// logRepeat logs, at debug level, a claim that counts more than one attempt, with
// what it was decided from: why a job's record counts more attempts than it had runs
// is told by these lines.
func (w *Worker) logRepeat(j *Job, next, prev *record.Record) {
	args := []any{"job", j.id, "attempt", next.Attempt, "state", next.State, "sequence", j.md.Sequence.Stream,
		"delivery", j.md.NumDelivered, "epoch", j.lease.inc.Epoch, "twin", j.twin}
	if prev != nil {
		args = append(args, "prev_state", prev.State, "prev_attempt", prev.Attempt, "prev_sequence", prev.Sequence,
			"prev_delivery", prev.Delivery, "prev_epoch", prev.Epoch)
	}
	w.log.Debug("claim of a job delivered before", args...)
}
