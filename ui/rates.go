package ui

import (
	"time"

	"github.com/workq/workq/admin"
)

// rateSpan is how far back the queues' rates look.
const rateSpan = 5 * time.Minute

// sample is one reading of a queue's counters and depths: an entry of its history
// (history.go). The counters only grow while the queue lives, so the difference of
// two samples is what happened between them: the stream's last sequence grows with
// every job stored, and what it stored less what it still holds is what left.
type sample struct {
	at       int64  // when it was read, Unix nanoseconds
	arrived  uint64 // the stream's last sequence: jobs stored so far (enqueued, fired, requeued)
	held     uint64 // messages in the stream: jobs, delayed jobs and schedules
	dead     uint64 // dead letters
	pending  uint64 // waiting: not yet delivered to a worker
	running  uint32 // delivered, not waiting out a retry
	retrying uint32 // waiting out a retry's backoff
	oldest   int64  // the age of the oldest job, nanoseconds; 0 without one
	// failed is 1 + the failed attempts the queue's records showed so far
	// (admin.JobTally), for the sampler's readings; 0 for a page's, which reads none.
	failed uint64
}

// sampleOf reads q's sample at.
func sampleOf(q admin.QueueInfo, at time.Time) sample {
	s := sample{
		at: at.UnixNano(), arrived: q.LastSequence, held: q.Jobs + q.Scheduled + q.Schedules, dead: q.Dead,
		pending: q.Pending, running: uint32(max(q.Running, 0)), retrying: uint32(max(q.Retrying, 0)),
	}
	if !q.FirstJob.IsZero() {
		s.oldest = max(at.Sub(q.FirstJob).Nanoseconds(), 0)
	}
	return s
}

// left is how many jobs have left the stream (done, dead, cancelled, purged).
func (s sample) left() uint64 { return s.arrived - min(s.arrived, s.held) }

// flow is how many jobs arrived, left and died from a to b. A counter that went
// down (dead letters requeued or purged) counts nothing: no flow is negative.
func flow(a, b sample) (in, out, dead float64) {
	grew := func(from, to uint64) float64 {
		if to <= from {
			return 0
		}
		return float64(to - from)
	}
	return grew(a.arrived, b.arrived), grew(a.left(), b.left()), grew(a.dead, b.dead)
}

// Rate is a queue's flow per minute over Span.
type Rate struct {
	Span    time.Duration
	In      float64 // jobs stored per minute (enqueued, fired, requeued)
	Out     float64 // jobs that left the stream per minute (done, dead, cancelled, purged)
	Dead    float64 // dead letters added per minute
	Known   bool    // two samples at least: the rates mean something
	Elapsed string
}

// rateBetween is the flow per minute from a to b; not Known under a second apart.
func rateBetween(a, b sample) Rate {
	span := time.Duration(b.at - a.at)
	if span < time.Second {
		return Rate{}
	}
	in, out, dead := flow(a, b)
	m := span.Minutes()
	return Rate{Span: span, Known: true, Elapsed: shortDuration(span), In: in / m, Out: out / m, Dead: dead / m}
}
