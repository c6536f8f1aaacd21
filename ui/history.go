package ui

import (
	"sync"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// The history's bounds. It spans historyIntervals sampling intervals (an hour at
// the default 5 s, SampleEvery); a reading is kept at most every half interval (the
// sampler's, and the pages' own in between), so historyLen samples always hold the
// whole span. A sample is 64 bytes: a queue's samples take at most historyBytes,
// 92 224 bytes (90 KiB), whatever the interval — 9.2 MB for 100 queues.
const (
	historyIntervals = 720
	historyLen       = 2*historyIntervals + 1
	historyBytes     = historyLen * 64
)

// history keeps, per queue, a ring of its last samples: what the charts draw and
// the rates are derived from. The background sampler (sampler.go) adds one every
// interval; each page served adds the reading it made, if half an interval has
// passed since the last one kept, so a page that refreshes often makes the
// history no larger and a rate is never taken over a sliver of time. A queue
// deleted (not among the queues read) is forgotten; a queue re-created under the
// same name starts a new history.
type history struct {
	every  time.Duration // the sampling interval
	mu     sync.Mutex
	queues map[string]*ring
}

func newHistory(every time.Duration) *history {
	return &history{every: every, queues: map[string]*ring{}}
}

// ring is a queue's samples, oldest first: at most historyLen, the oldest
// overwritten by the next.
type ring struct {
	created int64    // when the queue's stream was created, Unix nanoseconds (0 if not known)
	buf     []sample // grows to historyLen, then wraps
	start   int      // where the oldest is once buf is full
}

func (r *ring) len() int        { return len(r.buf) }
func (r *ring) at(i int) sample { return r.buf[(r.start+i)%len(r.buf)] }
func (r *ring) last() sample    { return r.at(len(r.buf) - 1) }
func (r *ring) empty() bool     { return len(r.buf) == 0 }

// setLastFailed sets the newest sample's tally of failed attempts.
func (r *ring) setLastFailed(n uint64) { r.buf[(r.start+len(r.buf)-1)%len(r.buf)].failed = n }

// fresh reports whether s may follow the ring's samples: a stream's last sequence
// that went back is a queue deleted and created again.
func (r *ring) fresh(s sample) bool { return r.empty() || r.last().arrived <= s.arrived }

// push adds s, overwriting the oldest sample once the ring is full. The buffer
// grows by doubling up to historyLen exactly, never past it.
func (r *ring) push(s sample) {
	if n := len(r.buf); n < historyLen {
		if n == cap(r.buf) {
			grown := make([]sample, n, min(max(2*n, 16), historyLen))
			copy(grown, r.buf)
			r.buf = grown
		}
		r.buf = append(r.buf, s)
		return
	}
	r.buf[r.start] = s
	r.start = (r.start + 1) % historyLen
}

// observe adds q's reading at (if half an interval after the last sample kept) and
// returns q's rates over the last rateSpan up to this reading. tally, when not nil,
// is the queue's job tally read with it (the sampler's readings).
func (h *history) observe(q admin.QueueInfo, at time.Time, tally *producer.JobTally) Rate {
	s := sampleOf(q, at)
	if tally != nil {
		s.failed = tally.FailedAttempts + 1
	}
	var created int64
	if !q.Created.IsZero() {
		created = q.Created.UnixNano()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.queues[q.Name]
	if r == nil || r.created != created {
		r = &ring{created: created}
		h.queues[q.Name] = r
	}
	switch {
	case r.empty() || s.at-r.last().at >= int64(h.every/2):
		// A re-created queue starts its sequence again: forget the old one's
		// samples. Only a newer reading says so: the sampler's comes from the
		// pages' shared snapshot, and may be older than a page's own reading kept
		// just before, with smaller counters.
		if !r.fresh(s) {
			r = &ring{created: created}
			h.queues[q.Name] = r
		}
		r.push(s)
	case s.failed != 0 && r.last().failed == 0:
		// The sampler's tally of failed attempts, read now, on the reading kept
		// within half an interval (a page's): else pages refreshing often would keep
		// most of the tallies out, and the failed attempts' points with them.
		r.setLastFailed(s.failed)
	}
	// The oldest sample before s within rateSpan; the newest before s if none is.
	first, found := sample{}, false
	for i := r.len() - 1; i >= 0; i-- {
		e := r.at(i)
		if e.at >= s.at {
			continue
		}
		if found && s.at-e.at > int64(rateSpan) {
			break
		}
		first, found = e, true
	}
	if !found {
		return Rate{}
	}
	return rateBetween(first, s)
}

// samples returns a copy of queue name's samples over the history's span up to
// the newest, oldest first; nil if it has none.
func (h *history) samples(name string) []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.queues[name]
	if r == nil || r.empty() {
		return nil
	}
	from := r.last().at - int64(historyIntervals)*int64(h.every)
	out := make([]sample, 0, r.len())
	for i := range r.len() {
		if s := r.at(i); s.at >= from {
			out = append(out, s)
		}
	}
	return out
}

// forget drops the history of the queues not in live.
func (h *history) forget(live map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for q := range h.queues {
		if !live[q] {
			delete(h.queues, q)
		}
	}
}
