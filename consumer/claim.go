package consumer

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/mutant"
	"github.com/workq/workq/internal/protocol"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/retry"
)

// The claim of a fenced delivery (docs/delivery.md). The job record is the only
// truth: every delivery reads or compare-and-sets the record before its handler
// starts, and nothing is decided from JetStream's delivery count, the consumer's
// creation time, the message's sequence or what this process remembers of other
// deliveries. The decision itself is protocol.DecideClaim; this file makes its engine
// calls.

// verdict is what a claim decided to do with a delivery.
type verdict int

const (
	runIt       verdict = iota // claimed: run the handler
	alreadyDone                // a copy of an enqueue that was committed: ack, never run
	repeated                   // a copy of an enqueue of the id that ended before the record's, or a repeat of the record's within the duplicate window: ack, never run
	alreadyDead                // a copy of an enqueue that died: make sure the dead letter exists, terminate
	cancelled                  // a copy of an enqueue that was cancelled: drop it without running
	watched                    // another run holds a live claim: put back for the rest of its lease, at most watchPoll
	early                      // the job's retry time has not come: put back until then
	busy                       // another enqueue of the id is live: put back until it ends
	exhausted                  // the next run would exceed the attempts: dead-letter without running
	unreadable                 // the value at the job's key is not its record: dead-letter without running (see claimUnreadable)
)

// maxClaimRounds bounds the read-decide-write rounds of one claim: each lost round
// means another run wrote the record meanwhile.
const maxClaimRounds = 8

// claimDelivery decides what this delivery does, and writes its claim when it runs.
// A delivery's first round writes its claim blind, as a create that expects no
// record (no read on the common path: a new job); any other outcome reads the record
// and decides from it. On runIt j.claim is the written claim and j.token its
// revision; on exhausted and alreadyDead j.claim is the record to settle from; on
// watched, early and busy j.retryIn is how long to wait. An error means the claim's
// outcome is not known (the server did not answer): the handler does not run.
//
// Its reads and writes are bounded by a write context (writeContext).
func (w *Worker) claimDelivery(ctx context.Context, j *Job) (verdict, error) {
	ctx, cancel := w.writeContext(ctx)
	defer cancel()
	j.run = w.nextRun()
	d := protocol.Delivery{Enqueue: j.enqueue, MaxAttempts: j.maxAttempts, StoredAt: j.md.Timestamp,
		Window: w.objects.Stream.CachedInfo().Config.Duplicates, Dedup: j.dedup}
	var rec *record.Record // nil: none (on the first round: none known)
	for round := range maxClaimRounds {
		if round > 0 || j.recorded {
			r, err := w.records.Get(ctx, j.id)
			switch {
			case errors.Is(err, record.ErrNotFound):
				rec = nil
			case errors.Is(err, record.ErrCorrupt):
				return w.claimUnreadable(j, err), nil
			case err != nil:
				return 0, err
			default:
				rec = r
			}
		}
		pr := w.protoRecord(rec)
		if rec != nil && sameEnqueue(j, rec) {
			pr.Enqueue = j.enqueue
		}
		d.OtherGone, d.ServerNow = false, time.Time{}
		dec := protocol.DecideClaim(pr, d, j.run, w.cfg.ackWait, time.Now())
		if dec.Verdict == protocol.Clock {
			// A run holds the job: its lease is judged by the clock of the server
			// that wrote the record, read now.
			now, err := w.records.Now(ctx)
			if err != nil {
				return 0, err
			}
			d.ServerNow = now
			dec = protocol.DecideClaim(pr, d, j.run, w.cfg.ackWait, time.Now())
		}
		if dec.Verdict == protocol.Later && !sameEnqueue(j, rec) {
			// Another enqueue of the id holds its record live: it does, while its
			// message is in the stream.
			live, err := w.messageLive(ctx, rec.Sequence)
			if err != nil {
				return 0, err
			}
			if !live {
				d.OtherGone = true
				dec = protocol.DecideClaim(pr, d, j.run, w.cfg.ackWait, time.Now())
			}
		}
		switch dec.Verdict {
		case protocol.Ack:
			j.claim = rec
			switch {
			case !sameEnqueue(j, rec):
				return repeated, nil // a copy of an earlier enqueue, or a repeat of the record's
			case rec.State == record.Cancelled:
				return cancelled, nil
			}
			return alreadyDone, nil
		case protocol.Term:
			j.claim, j.attempt = rec, rec.Attempt
			return alreadyDead, nil
		case protocol.Watch:
			j.retryIn = dec.Wait
			return watched, nil
		case protocol.Later:
			j.retryIn = dec.Wait
			if sameEnqueue(j, rec) {
				return early, nil
			}
			return busy, nil
		case protocol.Exhausted:
			// The record it ends with counts the attempts made, over the record read.
			c := *rec
			c.Run, c.MaxAttempts = j.run, j.maxAttempts
			j.claim, j.attempt = &c, c.Attempt
			return exhausted, nil
		}
		next := w.fresh(j, dec.Next)
		if mutant.On(mutant.DeliveryCount) {
			next.Attempt = int(j.md.NumDelivered)
		}
		if rec != nil {
			next.LastError = recordError(rec.LastError) // cut like our own: another client may have written one that would not fit
			if sameEnqueue(j, rec) {
				carryTask(next, rec)
				next.Errors = rec.Errors
			}
		}
		err := w.cas(ctx, next, dec.Next.Revision)
		switch {
		case err == nil:
			j.claim, j.token, j.attempt = next, next.Revision, next.Attempt
			if rec != nil && rec.State == record.Running && sameEnqueue(j, rec) {
				w.log.Warn(fmt.Sprintf("job %s: the claim of run %s went its lease (%s) without a renewal; taking the job over", j.id, rec.Run, pr.Lease),
					"job", j.id, "attempt", next.Attempt, "prev_worker", workerName(rec), "revision", rec.Revision)
			}
			if next.Attempt > 1 {
				w.logRepeat(j, next, rec)
			}
			return runIt, nil
		case !errors.Is(err, record.ErrConflict):
			return 0, err
		}
		// Someone wrote the record between our read (or our blind create) and our
		// write: read it again.
	}
	return 0, fmt.Errorf("job %s: claim kept conflicting", j.id)
}

// sameEnqueue reports whether rec is the record of j's enqueue: it names it, or it
// names j's very message by its stream sequence (a record written by an older worker
// or another client that sets no enqueue; the sequences of a stream's live messages
// are unique).
func sameEnqueue(j *Job, rec *record.Record) bool {
	return rec.Enqueue == j.enqueue || rec.Sequence == j.md.Sequence.Stream
}

// protoRecord is r as the protocol decides from it; nil for none. A record without a
// lease (written by an older worker or another client) stands for this worker's
// AckWait.
func (w *Worker) protoRecord(r *record.Record) *protocol.Record {
	if r == nil {
		return nil
	}
	lease := time.Duration(r.LeaseMS) * time.Millisecond
	if lease <= 0 {
		lease = w.cfg.ackWait
	}
	return &protocol.Record{
		State: protocol.State(r.State), Attempt: r.Attempt, Enqueue: r.Enqueue, Ended: r.Ended, StoredAt: r.StoredAt,
		Run: r.Run, Lease: lease, WrittenAt: r.WrittenAt, RetryAt: r.RetryAt, Revision: r.Revision,
	}
}

// fresh is the claim this delivery writes as the protocol's claim c says (its
// attempt, store time and ended enqueues). Its Revision is 0 until it is written.
func (w *Worker) fresh(j *Job, c protocol.Record) *record.Record {
	return &record.Record{
		ID: j.id, Queue: w.names.Queue, Kind: j.kind, State: record.Running, Attempt: c.Attempt,
		MaxAttempts: j.maxAttempts, Enqueue: j.enqueue, Run: j.run, LeaseMS: w.cfg.ackWait.Milliseconds(),
		Sequence: j.md.Sequence.Stream, Worker: &w.identity, EnqueuedAt: j.enqueuedAt, StartedAt: time.Now(),
		ScheduledAt: j.scheduledAt, Schedule: j.schedule, StoredAt: c.StoredAt, Ended: c.Ended,
	}
}

// cas writes next over revision prev by compare-and-set (prev 0: the job has no live
// record; a finished record of an earlier message is written over by the claim's
// decision, never here) and sets next.Revision. It retries transient errors, each
// try bounded by a quarter of the write budget, so that a try lost with a failed node
// leaves time for more once a new leader is elected.
//
// A write whose outcome is unknown is resolved by reading, never guessed
// (resolveConflict): it returns nil when the write, or an earlier try of it whose
// reply was lost, is in the record (protocol.Landed); record.ErrConflict when a read
// shows another write in its place; any other error when the outcome stayed unknown.
func (w *Worker) cas(ctx context.Context, next *record.Record, prev uint64) error {
	perTry := min(max(w.cfg.ackWait/4, 200*time.Millisecond), 5*time.Second)
	return retry.DoEach(ctx, perTry, func(c context.Context) error {
		var err error
		switch {
		case prev == 0 && mutant.On(mutant.BlindCreate):
			err = w.records.Put(c, next)
		case prev == 0:
			err = w.records.Create(c, next)
		default:
			err = w.records.Update(c, next, prev)
		}
		if errors.Is(err, record.ErrConflict) {
			return w.resolveConflict(c, next, prev, err)
		}
		return err
	})
}

// resolveConflict decides what a refused compare-and-set of next over revision prev
// means, by reading the record. At a later revision, it is this run's own write (an
// earlier try that landed with its reply lost) when the run and the state are
// next's: success. Any other record in its place is the conflict, and so is no record
// or one that is not the job's. The record may also not have moved yet: a replicated
// stream refuses a write while another write of the same key is in flight (error
// 10164), most likely this run's earlier try, still being replicated after a change
// of leader; it looks again until the record moves, as long as ctx lets it. A record
// that never moves, or that could not be read, leaves the outcome unknown: an error
// that is not a conflict.
func (w *Worker) resolveConflict(ctx context.Context, next *record.Record, prev uint64, conflict error) error {
	for {
		cur, err := w.records.Get(ctx, next.ID)
		switch {
		case errors.Is(err, record.ErrNotFound), errors.Is(err, record.ErrCorrupt):
			return conflict
		case err != nil:
			return fmt.Errorf("job %s: after a refused write, the record could not be read: %w", next.ID, err)
		case protocol.Landed(w.protoRecord(cur), next.Run, protocol.State(next.State), prev):
			next.Revision = cur.Revision
			return nil
		case cur.Revision != prev:
			return conflict
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s: a write was refused and the record did not move from revision %d: %w", next.ID, prev, ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
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
// an operator can requeue the job and it runs as a new message would. It counts no
// attempts: the value says nothing of the runs made.
func (w *Worker) claimUnreadable(j *Job, err error) verdict {
	c := w.fresh(j, protocol.Record{})
	c.StartedAt = time.Time{}
	var ce *record.CorruptError
	if errors.As(err, &ce) {
		c.Revision = ce.Revision // the dead record replaces the value read, and only it
	}
	j.claim, j.attempt, j.unreadable = c, c.Attempt, err
	return unreadable
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

// logRepeat logs, at debug level, a claim of a job claimed before, with what it was
// decided from.
func (w *Worker) logRepeat(j *Job, next, prev *record.Record) {
	args := []any{"job", j.id, "attempt", next.Attempt, "run", next.Run, "sequence", j.md.Sequence.Stream,
		"delivery", j.md.NumDelivered}
	if prev != nil {
		args = append(args, "prev_state", prev.State, "prev_attempt", prev.Attempt, "prev_run", prev.Run,
			"prev_sequence", prev.Sequence)
	}
	w.log.Debug("claim of a job claimed before", args...)
}

// runIDs makes the ids of this worker's runs: a random prefix drawn at New, and a
// counter. An id names one claim and is never made again, by this worker or another.
type runIDs struct {
	prefix string
	mu     sync.Mutex
	n      uint64
}

func newRunIDs() *runIDs {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return &runIDs{prefix: base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]) + "."}
}

// nextRun is a new run id.
func (w *Worker) nextRun() string {
	r := w.runIDs
	r.mu.Lock()
	r.n++
	n := r.n
	r.mu.Unlock()
	return r.prefix + strconv.FormatUint(n, 36)
}
