package ui

import (
	"sync"
	"time"

	"github.com/workq/workq/admin"
)

// rateSpan is how far back the queues' rates look.
const rateSpan = 5 * time.Minute

// rates keeps, per queue, the samples of its counters that the pages read, to show
// how fast jobs arrive, leave and die over the last minutes. Samples are taken as
// pages are served (each refresh is one), so rates start with the first two.
type rates struct {
	mu      sync.Mutex
	samples map[string][]sample
}

type sample struct {
	at      time.Time
	arrived uint64 // the stream's last sequence
	held    uint64 // messages in the stream
	dead    uint64 // dead letters
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

func newRates() *rates { return &rates{samples: map[string][]sample{}} }

// observe records q's counters now and returns its rates.
func (rs *rates) observe(q admin.QueueInfo, now time.Time) Rate {
	s := sample{at: now, arrived: q.LastSequence, held: q.Jobs + q.Scheduled + q.Schedules, dead: q.Dead}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	ss := rs.samples[q.Name]
	// A re-created queue starts its sequence again: forget the old one's samples.
	if n := len(ss); n > 0 && ss[n-1].arrived > s.arrived {
		ss = nil
	}
	if n := len(ss); n == 0 || now.Sub(ss[n-1].at) >= time.Second {
		ss = append(ss, s) // several pages refreshing at once add one sample a second
	}
	i := 0
	for i < len(ss)-1 && now.Sub(ss[i].at) > rateSpan {
		i++
	}
	ss = ss[i:]
	rs.samples[q.Name] = ss
	first := ss[0]
	span := now.Sub(first.at)
	if len(ss) < 2 || span < time.Second {
		return Rate{}
	}
	perMin := func(from, to uint64) float64 {
		if to <= from {
			return 0
		}
		return float64(to-from) / span.Minutes()
	}
	return Rate{
		Span: span, Known: true, Elapsed: shortDuration(span),
		In:   perMin(first.arrived, s.arrived),
		Out:  perMin(first.arrived-min(first.arrived, first.held), s.arrived-min(s.arrived, s.held)),
		Dead: perMin(first.dead, s.dead),
	}
}

// forget drops the samples of the queues not in live.
func (rs *rates) forget(live map[string]bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for q := range rs.samples {
		if !live[q] {
			delete(rs.samples, q)
		}
	}
}
