package protocol

// The simulated worker: a delivery's life under the protocol — read the record,
// decide (DecideClaim), claim, run under a renewed lease, settle — each step an
// event, so that faults interleave with it.

import (
	"fmt"
	"time"
)

// step runs fn for delivery d on its worker after a moment, or after the worker
// thaws; never if it died.
func (s *sim) step(d *delivery, fn func(*delivery)) {
	s.at(time.Millisecond, func() {
		switch {
		case d.w.dead:
		case d.w.frozen > s.now:
			s.at(d.w.frozen-s.now, func() { s.step(d, fn) })
		default:
			fn(d)
		}
	})
}

func (s *sim) release(d *delivery) { d.w.slots++ }

func (s *sim) jobOf(id string) *job {
	for _, j := range s.jobs {
		if j.id == id {
			return j
		}
	}
	return nil
}

// handle is the claim: read the record, decide, act.
func (s *sim) handle(d *delivery) {
	rec, ok := s.read(d.m.id)
	if !ok {
		s.release(d) // redelivered after AckWait
		return
	}
	w := d.w
	w.runs++
	run := fmt.Sprintf("w%d.%d", w.n, w.runs)
	dec := s.decide(rec, d, run)
	s.logf("worker %d, message %d (job %s) count %d: %s (%s)", w.n, d.m.seq, d.m.id, d.count, dec.Verdict, dec.Why)
	s.seen[dec.Verdict.String()]++
	if dec.Verdict == Claim && rec != nil && rec.State == Running {
		s.seen["takeover"]++
	}
	if (dec.Verdict == Ack || dec.Verdict == Term) && d.count == 1 {
		s.seen["first delivery of an ended job"]++
	}
	switch dec.Verdict {
	case Claim:
		s.claim(d, dec.Next, run)
	case Ack, Term:
		s.ack(d.m)
		s.release(d)
	case Exhausted:
		next := Record{State: Dead, Enqueue: d.m.enqueue, Run: run}
		var prev uint64
		if rec != nil {
			next.Attempt, prev = rec.Attempt, rec.Revision
		}
		if _, o := s.write(d.m.id, prev, next, d.m.seq); o == written {
			s.ack(d.m)
		}
		s.release(d)
	case Watch, Later:
		s.nak(d.m, dec.Wait)
		s.release(d)
	}
}

// decide is DecideClaim, or a mutant of it: a rule of the older protocol.
func (s *sim) decide(rec *Record, d *delivery, run string) Decision {
	dl := Delivery{Enqueue: d.m.enqueue, MaxAttempts: simMax, ServerNow: time.Time{}.Add(s.now)}
	switch s.mutant {
	case "lazy-first":
		if d.count == 1 {
			// Provably current by the delivery count: run at once, claim at commit.
			return Decision{Verdict: Claim, Next: Record{State: Running, Attempt: 1, Enqueue: d.m.enqueue, Run: run, Lease: simLease, Revision: lazy}, Why: "lazy"}
		}
	case "done-only":
		if e := s.kv[d.m.id]; rec != nil && e != nil && rec.Enqueue == d.m.enqueue && (rec.State == Dead || rec.State == Cancelled) && e.seq != d.m.seq {
			return Decision{Verdict: Claim, Next: Record{State: Running, Attempt: 1, Enqueue: d.m.enqueue, Run: run, Lease: simLease, Revision: rec.Revision}, Why: "another message's record"}
		}
	}
	dec := DecideClaim(rec, dl, run, simLease, time.Time{}.Add(s.now+d.w.skew))
	if s.mutant == "count-attempts" && dec.Verdict == Claim {
		dec.Next.Attempt = d.count
	}
	return dec
}

// lazy marks a claim not written before the run (mutant lazy-first).
const lazy = ^uint64(0)

func (s *sim) claim(d *delivery, next Record, run string) {
	if next.Revision == lazy {
		s.start(d, next)
		return
	}
	prev := next.Revision
	r, o := s.write(d.m.id, prev, next, d.m.seq)
	switch o {
	case written:
		s.start(d, r)
	case conflict:
		s.step(d, s.handle)
	case failed:
		s.release(d)
	case unknown:
		// Resolved by reading until it is known, for up to half a lease; a claim
		// still unknown then is not run (it counts an attempt if it landed).
		var resolve func(tries int)
		resolve = func(tries int) {
			cur, ok := s.read(d.m.id)
			switch {
			case ok && Landed(cur, run, Running, prev):
				s.seen["claim landed, reply lost"]++
				s.start(d, *cur)
			case ok, tries >= 10:
				s.release(d)
			default:
				s.at(simLease/20, func() { s.step(d, func(*delivery) { resolve(tries + 1) }) })
			}
		}
		s.step(d, func(*delivery) { resolve(0) })
	}
}

// start runs the handler under claim c.
func (s *sim) start(d *delivery, c Record) {
	if st, ok := s.ended[d.m.enqueue]; ok {
		s.fail("job %s (enqueue %s) started after its record was terminal (%s)", d.m.id, d.m.enqueue, st)
		return
	}
	s.starts[d.m.enqueue]++
	j := s.jobOf(d.m.id)
	end := s.now + j.runtime
	attempt := c.Attempt
	claim := c
	var beat func()
	beat = func() {
		if d.w.dead || claim.Revision == 0 {
			return
		}
		if d.w.frozen > s.now {
			s.at(d.w.frozen-s.now, beat)
			return
		}
		if s.now >= end {
			s.finish(d, claim, attempt <= j.fails)
			return
		}
		s.progress(d.m)
		if claim.Revision != lazy {
			renewed := claim
			r, o := s.write(d.m.id, claim.Revision, renewed, d.m.seq)
			switch o {
			case written:
				claim = r
			case conflict:
				s.logf("worker %d: run of job %s lost its claim; handler cancelled", d.w.n, d.m.id)
				s.release(d)
				return
			case unknown:
				if cur, ok := s.read(d.m.id); ok && Landed(cur, claim.Run, Running, claim.Revision) {
					claim = *cur
				}
			}
		}
		s.at(min(simHeartbeat, end-s.now), beat)
	}
	s.at(min(simHeartbeat, j.runtime), beat)
}

// finish settles a run that ended: commit, retry or dead letter, by compare-and-set
// on the claim.
func (s *sim) finish(d *delivery, claim Record, failedRun bool) {
	next := claim
	switch {
	case !failedRun:
		next.State = Done
	case claim.Attempt >= simMax:
		next.State = Dead
	default:
		next.State, next.RetryAt = Retrying, time.Time{}.Add(s.now+d.w.skew+200*time.Millisecond)
	}
	prev := claim.Revision
	if prev == lazy {
		prev = 0 // the lazy commit: a create that fails if any record exists
	}
	var settle func(tries int)
	settle = func(tries int) {
		_, o := s.write(d.m.id, prev, next, d.m.seq)
		if o == unknown {
			cur, ok := s.read(d.m.id)
			switch {
			case !ok:
				o = failed
			case Landed(cur, next.Run, next.State, prev):
				o = written
			default:
				o = conflict
			}
		}
		switch o {
		case written:
			if next.State == Retrying {
				s.nak(d.m, 200*time.Millisecond)
			} else {
				s.ack(d.m)
			}
			s.release(d)
		case conflict:
			s.seen["settle refused"]++
			s.logf("worker %d: job %s was reassigned; its %s refused", d.w.n, d.m.id, next.State)
			s.release(d)
		case failed:
			if tries < 5 {
				s.at(100*time.Millisecond, func() { s.step(d, func(*delivery) { settle(tries + 1) }) })
				return
			}
			s.release(d)
		}
	}
	settle(0)
	if s.commits[d.m.enqueue] > 1 {
		s.fail("job %s (enqueue %s) committed %d times", d.m.id, d.m.enqueue, s.commits[d.m.enqueue])
	}
	if s.cancelled[d.m.enqueue] && s.commits[d.m.enqueue] > 0 {
		s.fail("job %s (enqueue %s) committed after it was cancelled", d.m.id, d.m.enqueue)
	}
}
