package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/wireid"
)

// A sequence (docs/sequences.md) is the jobs enqueued with one key, run one at a time
// in enqueue order. It is a chain of job records, each waiting for the one before, as
// a workflow's task waits for its parents, and released by the same telling. Two
// values beside the records link it, under keys no job id's token takes (a token
// never starts with "==."):
//
//   - the key's tail, TailKey(key): the last job enqueued with it;
//   - a job's successor, NextKey(id): the job enqueued after it while it had not
//     ended, which waits for it.
//
// The successor is not written into the job's own record: that record is its run's
// fence while it runs, and a write by the producer would supersede the run.
// An enqueue writes the tail, the predecessor's successor and the new record in one
// atomic batch; a job's end tells its successor after its terminal write.

// Link is the value at a tail or successor key: the job it names.
type Link struct {
	Key string `json:"key,omitempty"` // the sequence's key (a tail's)
	Job string `json:"job"`
}

// TailKey is the bucket key of sequence key's tail.
func TailKey(key string) string { return "==.seq." + wireid.Encode(key) }

// NextKey is the bucket key of job id's successor in sequence key. The key comes
// first so that the server's index of the bucket's keys tells which keys have jobs
// waiting (SequenceBacklog).
func NextKey(key, id string) string { return NextPrefix + wireid.Encode(key) + "." + wireid.Encode(id) }

// NextPrefix is the prefix of every successor's bucket key.
const NextPrefix = "==.next."

// ReadLink reads the link at key, with the key's revision, which a write over it
// expects: nil when there is none (rev is then a delete or purge marker's, or 0), or
// when the value is not a link (another client wrote it).
func ReadLink(ctx context.Context, s record.Store, key string) (l *Link, rev uint64, err error) {
	b, rev, err := s.GetKey(ctx, key)
	if errors.Is(err, record.ErrNotFound) {
		return nil, rev, nil
	}
	if err != nil {
		return nil, 0, err
	}
	l = &Link{}
	if json.Unmarshal(b, l) != nil || l.Job == "" {
		return nil, rev, nil
	}
	return l, rev, nil
}

// SequenceEnded reports whether sequence job rec has ended for the job after it, and
// whether it died, as seen by one that does not end it (the enqueue of the job after
// it). A job ends for its successor when its record does, except:
//
//   - one cancelled while it waited for the job before it: the key's order holds
//     through it, so it ends when that one does (and died if that one died);
//   - one cancelled while it ran: its run goes on until its worker sees the cancel
//     and its handler returns, and only then does its worker tell its successor and
//     remove its message (a worker that died leaves both to the message's next
//     delivery). So while its message is in the queue it has not ended.
func (r *Releaser) SequenceEnded(ctx context.Context, rec *record.Record) (ended, dead bool, err error) {
	return r.sequenceEnded(ctx, rec, "")
}

// sequenceEnded is SequenceEnded asked in the course of the end of job over (Ended:
// its worker's settle, a later delivery of its message, its cancel while it did not
// run, and what that end cascades to), whose run, if it had one, is over: over's
// message is not looked at, only those of other jobs rec waited for.
func (r *Releaser) sequenceEnded(ctx context.Context, rec *record.Record, over string) (ended, dead bool, err error) {
	for range 1 << 16 {
		switch {
		case !rec.State.Terminal():
			return false, false, nil
		case rec.State != record.Cancelled || len(rec.WaitingFor) == 0 || rec.After == "":
			if rec.ID != over {
				running, err := r.runGoesOn(ctx, rec)
				if err != nil || running {
					return false, false, err
				}
			}
			return true, rec.State == record.Dead, nil
		}
		prev, err := r.Store.Get(ctx, rec.After)
		if errors.Is(err, record.ErrNotFound) || errors.Is(err, record.ErrCorrupt) {
			return true, false, nil // ended long ago
		}
		if err != nil {
			return false, false, err
		}
		rec = prev
	}
	return false, false, fmt.Errorf("sequence %q: more than 65536 cancelled jobs in a row", rec.SequenceKey)
}

// runGoesOn reports whether rec, a record that has ended, may be of a run that goes
// on: a job cancelled after a claim (cancelledClaimed) whose message is still in the
// queue (see SequenceEnded).
func (r *Releaser) runGoesOn(ctx context.Context, rec *record.Record) (bool, error) {
	if !cancelledClaimed(rec) {
		return false, nil
	}
	in, err := r.inQueue(ctx, rec.Sequence)
	if err != nil {
		return false, fmt.Errorf("sequence %q: looking for the message of job %s, cancelled: %w", rec.SequenceKey, rec.ID, err)
	}
	return in, nil
}

// cancelledClaimed reports whether rec is of a job cancelled after a claim: it may
// have been cancelled as it ran. One cancelled before any claim (its message in its
// record, or published and never claimed) never ran.
func cancelledClaimed(rec *record.Record) bool {
	return rec.State == record.Cancelled && rec.Attempt > 0 && rec.Sequence != 0
}

// endedInSequence tells the successor of rec, a sequence's job that ended, that it
// did (SequenceEnded): a job that died fails it (the key halts there if the
// successor says so), a job done or cancelled lets it go. Then the links that named
// rec go: its successor link, and the key's tail if rec is still the last job and
// did not die (a dead last job's tail stays for the next enqueue to see). Both reads
// come after rec's terminal write, so a successor enqueued before it is found here,
// and one enqueued after it finds rec ended (Producer's enqueue tells it then).
//
// A job cancelled after a claim is the exception: its terminal write (the cancel)
// may have come before its run ended, and an enqueue that found it cancelled, its
// message still in the queue, links its job to it (SequenceEnded) after that write,
// by a batch that expects the tail it read, naming rec. Its tail goes first then,
// before the successor link is read: either the batch lands before the tail's
// removal, which then finds the tail moved and the link is found after it, or the
// removal lands first and the batch is refused (the enqueue reads again and finds no
// job before its own).
func (r *Releaser) endedInSequence(ctx context.Context, rec *record.Record, over string) error {
	if !rec.State.Terminal() {
		return fmt.Errorf("sequence %q: job %s has not ended (%s)", rec.SequenceKey, rec.ID, rec.State)
	}
	ended, dead, err := r.sequenceEnded(ctx, rec, over)
	if err != nil || !ended {
		return err // the job before it tells it when it ends, and this runs again
	}
	tailFirst := cancelledClaimed(rec)
	if tailFirst {
		if err := r.dropTail(ctx, rec); err != nil {
			return err
		}
	}
	next, nextRev, err := ReadLink(ctx, r.Store, NextKey(rec.SequenceKey, rec.ID))
	if err != nil {
		return fmt.Errorf("sequence %q: reading the successor of job %s: %w", rec.SequenceKey, rec.ID, err)
	}
	if next != nil {
		if err := r.tellJob(ctx, next.Job, rec.ID, dead, nil, over); err != nil {
			return fmt.Errorf("sequence %q: %w", rec.SequenceKey, err)
		}
		return r.Store.DeleteKey(ctx, NextKey(rec.SequenceKey, rec.ID), nextRev)
	}
	if dead || tailFirst {
		// Dropped already; or the key's last job died, and the tail stays, so that a
		// job enqueued next with HaltOnDead halts there (until the record expires).
		return nil
	}
	return r.dropTail(ctx, rec)
}

// dropTail removes the key's tail of rec, a job that ended and did not die, if it
// still names rec.
func (r *Releaser) dropTail(ctx context.Context, rec *record.Record) error {
	tail, tailRev, err := ReadLink(ctx, r.Store, TailKey(rec.SequenceKey))
	if err != nil || tail == nil || tail.Job != rec.ID {
		return err
	}
	return r.Store.DeleteKey(ctx, TailKey(rec.SequenceKey), tailRev)
}
