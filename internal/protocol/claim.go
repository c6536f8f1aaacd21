// Package protocol holds the decisions of the delivery protocol in which the job
// record is the only truth, as kvlock's record is for a lock (docs/delivery.md):
// pure functions over the record and a delivery's facts, with no engine calls, so
// that a table tests every row; the seeded simulation (internal/sim) runs them in the
// shipped worker through the engine's failure modes and must reach every row (Rules).
//
// Nothing here rests on what the engine forgets: JetStream's delivery count, the
// consumer's creation time, a message's id or sequence, or what one worker process
// remembers of other deliveries. A delivery carries the enqueue it belongs to (a
// random id the producer stamps on every copy of one enqueue, retries included);
// the record says which enqueue it is the record of, which run holds it and for how
// long that run's lease lasts without a renewal.
package protocol

import (
	"slices"
	"time"

	"github.com/workq/workq/internal/mutant"
)

// State is where a job stands in its record.
type State string

// The states a record can hold (the public record's states).
const (
	Queued    State = "queued"
	Running   State = "running"
	Retrying  State = "retrying"
	Done      State = "done"
	Dead      State = "dead"
	Cancelled State = "cancelled"
	Waiting   State = "waiting" // a workflow's task whose parents have not all ended
)

// Terminal reports whether no more runs will be made of the enqueue the record is of.
func (s State) Terminal() bool { return s == Done || s == Dead || s == Cancelled }

// Record is what the claim decides from: the job record's protocol fields.
type Record struct {
	State     State
	Attempt   int           // claims made so far: runs started, exactly
	Enqueue   string        // the enqueue this record is of ("" for a client that sets none)
	Ended     []string      // the enqueues of the id the record was of before, oldest first (at most MaxEnded)
	StoredAt  time.Time     // when the server stored the message of Enqueue, if that carried the job id as message id (Delivery.Dedup); else zero
	Run       string        // the run that holds the job (Running), or made the last claim
	Lease     time.Duration // how long Run's claim stands without a renewal (Running)
	WrittenAt time.Time     // when the server stored this revision (server time, as read)
	RetryAt   time.Time     // when a Retrying job is due, on the failed run's clock
	Revision  uint64        // the record's revision: every write changes it
}

// MaxEnded is how many earlier enqueues of an id a record remembers.
const MaxEnded = 4

// Delivery is what a delivery knows of itself, besides the record.
type Delivery struct {
	Enqueue     string // the enqueue the message carries
	MaxAttempts int    // the attempts allowed
	// StoredAt is when the server stored the message (server time), and Window the
	// queue's duplicate window. Dedup says the message carries the job id as its
	// message id, so the server refuses another such message of the id within the
	// window — unless it forgot the first one's id (a restart forgets the ids of
	// removed messages). Of two such messages stored within the window of each other,
	// the second is a repeat of the first. A message without it (a foreign client's
	// publish, a requeued dead letter) is never a repeat.
	StoredAt time.Time
	Window   time.Duration
	Dedup    bool
	// OtherGone: the stream no longer holds the message of the record's enqueue,
	// when that is another enqueue of the id (an operator removed it, or a crash
	// lost it): its record will never end, so it does not hold this one back.
	// Learnt by a read when the verdict without it is Later for that reason.
	OtherGone bool
	// ServerNow is the clock of the server that stores the records (zero: not read):
	// a running record's lease is judged by it against WrittenAt. Learnt by a read
	// when the verdict without it is Clock.
	ServerNow time.Time
}

// Verdict is what a delivery does.
type Verdict int

// The verdicts of DecideClaim.
const (
	Claim     Verdict = iota // write the claim (Next) by compare-and-set, then run
	Ack                      // a copy or a repeat of an enqueue that ended, or that holds the record: ack it, never run
	Term                     // the enqueue is dead: make sure its dead letter exists, term the copy
	Exhausted                // the next run would exceed the attempts: dead-letter without running
	Watch                    // another run holds a live lease: put the copy back until the lease would run out (Wait)
	Later                    // not yet: a retry's backoff, or another enqueue of the id still live; put back for Wait
	Clock                    // a run holds the job: read the server's clock (Delivery.ServerNow) and decide again
)

var verdictNames = [...]string{"claim", "ack", "term", "exhausted", "watch", "later", "clock"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "verdict(?)"
}

// Decision is a verdict with what it needs: the claim to write (Claim), or how long
// to wait (Watch, Later).
type Decision struct {
	Verdict Verdict
	Next    Record        // Claim: the record to write over the one read (Revision: the one read, 0 for none)
	Wait    time.Duration // Watch, Later
	Why     string        // for logs and tests
	Rule    string        // the row of DecideClaim that decided (one of Rules)
}

// Rules names the rows of DecideClaim, in its order; Decision.Rule is one of them.
// The simulation must reach every one.
var Rules = []string{
	RuleNoRecord, RuleEndedCopy, RuleRepeat, RuleOtherEnded, RuleOtherGone, RuleOtherLive, RuleWaiting,
	RuleCancelledClock, RuleCancelledWatch, RuleCancelledAck, RuleEnded, RuleDead, RuleRunningClock,
	RuleRunningWatch, RuleTakeover, RuleBackoff, RuleNext, RuleExhausted,
}

// The rows of DecideClaim.
const (
	RuleNoRecord       = "no record"
	RuleEndedCopy      = "copy of an ended enqueue"
	RuleRepeat         = "repeat within the window"
	RuleOtherEnded     = "another enqueue ended"
	RuleOtherGone      = "another enqueue gone"
	RuleOtherLive      = "another enqueue live"
	RuleWaiting        = "waiting for parents"
	RuleCancelledClock = "cancelled run: clock"
	RuleCancelledWatch = "cancelled run: watch"
	RuleCancelledAck   = "cancelled run: ended"
	RuleEnded          = "done or cancelled"
	RuleDead           = "dead"
	RuleRunningClock   = "running: clock"
	RuleRunningWatch   = "running: watch"
	RuleTakeover       = "running: takeover"
	RuleBackoff        = "retrying: backoff"
	RuleNext           = "next attempt"
	RuleExhausted      = "attempts used"
)

// RetryTolerance is how early before its record's retry time a job may be claimed
// anyway: the clocks of the worker that failed it and of this one may differ a little.
const RetryTolerance = 100 * time.Millisecond

// WatchSlack is added to the rest of a lease that a copy is put back for, so that it
// comes back once the lease has run out rather than just before.
const WatchSlack = 25 * time.Millisecond

// DecideClaim decides what a delivery of d's enqueue does, given the job's record
// (nil: none), the new run's id and lease, and the local time (for a retry's time
// only). It is the whole of the claim:
//
//   - No record: claim attempt 1.
//   - A copy of an enqueue the record was of before (Ended): ack, never run.
//   - Another enqueue of the id whose message was stored within the duplicate window
//     of the record's: a repeat of the enqueue; ack, never run.
//   - The finished record of another enqueue of the id, or a live one whose message
//     is gone: claim attempt 1; the record's enqueue joins Ended.
//   - A live record of another enqueue: later, until that one ends.
//   - A record of this enqueue that is terminal ends the copy: done and cancelled are
//     acked, dead is termed; it never runs, whatever the copy's delivery count, message
//     id or sequence. A job cancelled after a claim is acked only a lease after the
//     cancel (by the server's clock, Clock until read): its run may go on until then,
//     and the ack tells what waits for the job.
//   - Running, held by another run: judged by the server's clock (Clock until it is
//     read), watched until its revision is a lease old, then taken over (attempt + 1).
//     No worker's memory or clock takes part: any worker, a fresh one too, takes over
//     a lease that ran out.
//   - Retrying: later until its retry time, then claim attempt + 1.
//   - Waiting (a workflow's task whose parents have not all ended): later.
//   - Queued (handed back unstarted, or a released task): claim attempt + 1.
//   - An attempt past MaxAttempts is exhausted: dead-lettered without running.
func DecideClaim(rec *Record, d Delivery, run string, lease time.Duration, now time.Time) Decision {
	dec := decideClaim(rec, d, run, lease, now)
	mutant.Reached(dec.Rule)
	return dec
}

func decideClaim(rec *Record, d Delivery, run string, lease time.Duration, now time.Time) Decision {
	claim := func(attempt int, rule, why string) Decision {
		if attempt > d.MaxAttempts {
			return Decision{Verdict: Exhausted, Rule: RuleExhausted, Why: why + "; attempts used"}
		}
		next := Record{State: Running, Attempt: attempt, Enqueue: d.Enqueue, Run: run, Lease: lease}
		if d.Dedup {
			next.StoredAt = d.StoredAt
		}
		if rec != nil {
			next.Revision, next.Ended = rec.Revision, rec.Ended
			if rec.Enqueue == d.Enqueue {
				next.StoredAt = earlier(rec.StoredAt, next.StoredAt)
			} else {
				next.Ended = AddEnded(rec.Ended, rec.Enqueue)
			}
		}
		return Decision{Verdict: Claim, Next: next, Rule: rule, Why: why}
	}
	switch {
	case rec == nil:
		return claim(1, RuleNoRecord, "no record")
	case rec.Enqueue != d.Enqueue && slices.Contains(rec.Ended, d.Enqueue):
		return Decision{Verdict: Ack, Rule: RuleEndedCopy, Why: "a copy of an earlier enqueue of the id, which ended"}
	case rec.Enqueue != d.Enqueue && d.repeats(rec):
		return Decision{Verdict: Ack, Rule: RuleRepeat, Why: "a repeat of the id's enqueue within the duplicate window"}
	case rec.Enqueue != d.Enqueue && rec.State.Terminal():
		return claim(1, RuleOtherEnded, "another enqueue of the id has ended")
	case rec.Enqueue != d.Enqueue && d.OtherGone:
		return claim(1, RuleOtherGone, "another enqueue of the id left a live record and no message")
	case rec.Enqueue != d.Enqueue:
		return Decision{Verdict: Later, Rule: RuleOtherLive, Wait: max(rec.Lease, time.Second), Why: "another enqueue of the id is live"}
	case rec.State == Waiting:
		// Its message is held until its last parent ends, and the release writes
		// it queued first: a copy seen now is put back until then.
		return Decision{Verdict: Later, Rule: RuleWaiting, Wait: max(rec.Lease, time.Second), Why: "waiting for its parent tasks"}
	case rec.State == Cancelled && mutant.On(mutant.CancelledReruns):
		return claim(rec.Attempt+1, RuleNext, "cancelled, run again (mutant)")
	case rec.State == Cancelled && rec.Attempt > 0 && rec.Run != "":
		// Cancelled after a claim, maybe as it ran: the run may go on until its
		// worker sees the cancel and its handler returns, and that worker settles
		// it. A copy (a server that forgot the delivery sent it again) ends it only
		// once a lease has passed since the cancel, by the server's clock: what
		// waits for the job must not start beside the run.
		if d.ServerNow.IsZero() {
			return Decision{Verdict: Clock, Rule: RuleCancelledClock, Why: "cancelled after run " + rec.Run + "'s claim: judged by the server's clock"}
		}
		if age := d.ServerNow.Sub(rec.WrittenAt); age < rec.Lease {
			return Decision{Verdict: Watch, Rule: RuleCancelledWatch, Wait: rec.Lease - age + WatchSlack, Why: "cancelled as run " + rec.Run + " may still go on"}
		}
		return Decision{Verdict: Ack, Rule: RuleCancelledAck, Why: "record cancelled, a lease ago"}
	case rec.State == Done, rec.State == Cancelled:
		return Decision{Verdict: Ack, Rule: RuleEnded, Why: "record " + string(rec.State)}
	case rec.State == Dead:
		return Decision{Verdict: Term, Rule: RuleDead, Why: "record dead"}
	case rec.State == Running && mutant.On(mutant.EarlyTakeover):
		return claim(rec.Attempt+1, RuleTakeover, "taken over at once (mutant)")
	case rec.State == Running && d.ServerNow.IsZero():
		return Decision{Verdict: Clock, Rule: RuleRunningClock, Why: "held by run " + rec.Run + ": its lease is judged by the server's clock"}
	case rec.State == Running:
		if age := d.ServerNow.Sub(rec.WrittenAt); age < rec.Lease {
			return Decision{Verdict: Watch, Rule: RuleRunningWatch, Wait: rec.Lease - age + WatchSlack, Why: "held by run " + rec.Run}
		}
		return claim(rec.Attempt+1, RuleTakeover, "lease of run "+rec.Run+" expired")
	case rec.State == Retrying && rec.RetryAt.Sub(now) > RetryTolerance:
		return Decision{Verdict: Later, Rule: RuleBackoff, Wait: rec.RetryAt.Sub(now), Why: "backoff"}
	}
	return claim(rec.Attempt+1, RuleNext, "record "+string(rec.State))
}

// repeats reports whether d's message was stored within the duplicate window of the
// message of rec's enqueue: the same id enqueued twice, which the server refuses
// unless it forgot the first message's id.
func (d Delivery) repeats(rec *Record) bool {
	if !d.Dedup || d.Window <= 0 || d.StoredAt.IsZero() || rec.StoredAt.IsZero() {
		return false
	}
	apart := d.StoredAt.Sub(rec.StoredAt)
	return apart < d.Window && apart > -d.Window
}

// AddEnded is list, a record's ended enqueues, with enqueue added last, keeping the
// last MaxEnded; list itself is not changed. Every writer that puts the record of a
// new enqueue over another's keeps the other's this way (the claim, a cancel).
func AddEnded(list []string, enqueue string) []string {
	out := append(slices.Clone(list), enqueue)
	return out[max(0, len(out)-MaxEnded):]
}

// earlier is the earlier of two times, a zero one not counting.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// Landed reports whether rec, read after a write of run over revision prev whose
// outcome is unknown (its reply was lost), is that write: a later revision by the same
// run in the state written. Only one run writes records naming it, so that is proof.
// A write is resolved by reading, never guessed: a landed write is the run's own, any
// other is a conflict.
func Landed(rec *Record, run string, state State, prev uint64) bool {
	return rec != nil && rec.Revision > prev && rec.Run == run && rec.State == state
}
