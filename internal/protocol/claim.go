// Package protocol holds the decisions of the delivery protocol in which the job
// record is the only truth, as kvlock's record is for a lock (docs/delivery.md):
// pure functions over the record and a delivery's facts, with no engine calls, so
// that a table tests every row and a seeded simulation of the engine's failure modes
// (sim_*_test.go) checks the invariants over thousands of histories.
//
// Nothing here rests on what the engine forgets: JetStream's delivery count, the
// consumer's creation time, a message's id or sequence, or what one worker process
// remembers of other deliveries. A delivery carries the enqueue it belongs to (a
// random id the producer stamps on every copy of one enqueue, retries included);
// the record says which enqueue it is the record of, which run holds it and for how
// long that run's lease lasts without a renewal.
package protocol

import (
	"time"
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
	State    State
	Attempt  int           // claims made so far: runs started, exactly
	Enqueue  string        // the enqueue this record is of ("" for a client that sets none)
	Run      string        // the run that holds the job (Running), or made the last claim
	Lease    time.Duration // how long Run's claim stands without a renewal (Running)
	RetryAt  time.Time     // when a Retrying job is due, on the failed run's clock
	Revision uint64        // the record's revision: every write changes it
}

// Delivery is what a delivery knows of itself, besides the record.
type Delivery struct {
	Enqueue     string // the enqueue the message carries
	MaxAttempts int    // the attempts allowed
	// OtherGone: the stream no longer holds the message of the record's enqueue,
	// when that is another enqueue of the id (an operator removed it, or a crash
	// lost it): its record will never end, so it does not hold this one back.
	// Learnt by a read when the verdict without it is Later for that reason.
	OtherGone bool
}

// Sighting is what the deciding worker saw of the record before: the revision it
// read, and how long ago on its own clock it first read that revision. A worker that
// saw nothing yet passes the zero Sighting. Only the reader's own clock measures a
// lease, so clocks of different workers need not agree; a worker that forgets what
// it saw only waits longer.
type Sighting struct {
	Revision uint64
	For      time.Duration
}

// Verdict is what a delivery does.
type Verdict int

// The verdicts of DecideClaim.
const (
	Claim     Verdict = iota // write the claim (Next) by compare-and-set, then run
	Ack                      // the enqueue is done or cancelled: ack the copy, never run
	Term                     // the enqueue is dead: make sure its dead letter exists, term the copy
	Exhausted                // the next run would exceed the attempts: dead-letter without running
	Watch                    // another run holds a live lease: keep the copy, read again after Wait
	Later                    // not yet: a retry's backoff, or another enqueue of the id still live; put back for Wait
)

var verdictNames = [...]string{"claim", "ack", "term", "exhausted", "watch", "later"}

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
}

// RetryTolerance is how early before its record's retry time a job may be claimed
// anyway: the clocks of the worker that failed it and of this one may differ a little.
const RetryTolerance = 100 * time.Millisecond

// DecideClaim decides what a delivery of d's enqueue does, given the job's record
// (nil: none), what this worker saw of the record before, the new run's id and
// lease, and the local time. It is the whole of the claim:
//
//   - No record, or the finished record of another enqueue of the id: claim attempt 1.
//   - A record of this enqueue that is terminal ends the copy: done and cancelled are
//     acked, dead is termed; it never runs, whatever the copy's delivery count, message
//     id or sequence.
//   - A live record of another enqueue: later, until that one ends or its message
//     is found gone (OtherGone).
//   - Running, held by another run: watch until its revision has stood unchanged for
//     its lease on this worker's clock, then take it over (attempt + 1).
//   - Retrying: later until its retry time, then claim attempt + 1.
//   - Waiting (a workflow's task whose parents have not all ended): later.
//   - Queued (handed back unstarted, or a released task): claim attempt + 1.
//   - An attempt past MaxAttempts is exhausted: dead-lettered without running.
func DecideClaim(rec *Record, d Delivery, seen Sighting, run string, lease time.Duration, now time.Time) Decision {
	claim := func(attempt int, why string) Decision {
		if attempt > d.MaxAttempts {
			return Decision{Verdict: Exhausted, Why: why + "; attempts used"}
		}
		next := Record{State: Running, Attempt: attempt, Enqueue: d.Enqueue, Run: run, Lease: lease}
		if rec != nil {
			next.Revision = rec.Revision
		}
		return Decision{Verdict: Claim, Next: next, Why: why}
	}
	switch {
	case rec == nil:
		return claim(1, "no record")
	case rec.Enqueue != d.Enqueue && rec.State.Terminal():
		return claim(1, "another enqueue of the id has ended")
	case rec.Enqueue != d.Enqueue && d.OtherGone:
		return claim(1, "another enqueue of the id left a live record and no message")
	case rec.Enqueue != d.Enqueue:
		return Decision{Verdict: Later, Wait: max(rec.Lease, time.Second), Why: "another enqueue of the id is live"}
	case rec.State == Waiting:
		// Its message is held until its last parent ends, and the release writes
		// it queued first: a copy seen now is put back until then.
		return Decision{Verdict: Later, Wait: max(rec.Lease, time.Second), Why: "waiting for its parent tasks"}
	case rec.State == Done, rec.State == Cancelled:
		return Decision{Verdict: Ack, Why: "record " + string(rec.State)}
	case rec.State == Dead:
		return Decision{Verdict: Term, Why: "record dead"}
	case rec.State == Running:
		if seen.Revision == rec.Revision && seen.For >= rec.Lease {
			return claim(rec.Attempt+1, "lease of run "+rec.Run+" expired")
		}
		wait := rec.Lease
		if seen.Revision == rec.Revision {
			wait -= seen.For
		}
		return Decision{Verdict: Watch, Wait: wait, Why: "held by run " + rec.Run}
	case rec.State == Retrying && rec.RetryAt.Sub(now) > RetryTolerance:
		return Decision{Verdict: Later, Wait: rec.RetryAt.Sub(now), Why: "backoff"}
	}
	return claim(rec.Attempt+1, "record "+string(rec.State))
}

// Landed reports whether rec, read after a write of run over revision prev whose
// outcome is unknown (its reply was lost), is that write: a later revision by the same
// run in the state written. Only one run writes records naming it, so that is proof.
// A write is resolved by reading, never guessed: a landed write is the run's own, any
// other is a conflict.
func Landed(rec *Record, run string, state State, prev uint64) bool {
	return rec != nil && rec.Revision > prev && rec.Run == run && rec.State == state
}
