package ui

import (
	"strconv"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// The job page's timeline of attempts: each run of the job, oldest first, as a row
// with its outcome, worker, start, end and duration, and a bar on one time axis
// shared by all rows (template "timeline", templates/job.html). The failed attempts
// come from the record's history of errors (the last ten are kept), the last one
// from the record itself: running (with its progress), done, dead, cancelled.

// attempt is one row of the timeline.
type attempt struct {
	N            int    // the attempt's number; 0 for a cancel that ended no run
	Outcome      string // failed, running, done, dead, cancelled, interrupted
	Worker       string // "" if not known (a record of an older worker)
	Start, End   time.Time
	Duration     string // "—" without a start
	Error        string
	Open         bool // still running: its bar reaches now
	HasProgress  bool
	Progress     float64
	ProgressNote string
	X, W         string // its bar on the axis, in thousandths of the axis
}

// timeline is a job's attempts on one time axis, From to To.
type timeline struct {
	Attempts []attempt
	From, To time.Time
	Span     string
	Missing  int // the attempts before the first row, whose errors the record no longer keeps
}

// timelineWidth is the time axis' length in the bars' units (their viewBox).
const timelineWidth = 1000

// timelineOf lays out r's attempts, as of now.
func timelineOf(r *admin.Record, now time.Time) timeline {
	var tl timeline
	last := 0
	for _, e := range r.Errors {
		tl.Attempts = append(tl.Attempts, attempt{N: e.Attempt, Outcome: "failed", Worker: e.Worker, Start: e.Started, End: e.At, Error: e.Error})
		last = e.Attempt
	}
	if len(r.Errors) > 0 {
		tl.Missing = r.Errors[0].Attempt - 1
	}
	switch {
	case r.Attempt > last && !r.StartedAt.IsZero():
		tl.Attempts = append(tl.Attempts, current(r, now))
	case r.State == producer.StateDead && len(tl.Attempts) > 0:
		tl.Attempts[len(tl.Attempts)-1].Outcome = "dead" // its last failure ran out of attempts, or was permanent
	case r.State == producer.StateCancelled:
		tl.Attempts = append(tl.Attempts, attempt{Outcome: "cancelled", End: r.FinishedAt})
	}
	tl.place(now)
	return tl
}

// current is the record's own attempt, the last, when the history of errors does
// not hold it.
func current(r *admin.Record, now time.Time) attempt {
	a := attempt{N: r.Attempt, Worker: r.Worker.Name, Start: r.StartedAt, Outcome: string(r.State)}
	switch r.State {
	case producer.StateRunning:
		a.Open, a.End = true, now
		a.HasProgress, a.Progress, a.ProgressNote = !r.ProgressAt.IsZero(), r.Progress, r.ProgressNote
	case producer.StateDone, producer.StateCancelled:
		a.End = r.FinishedAt
	case producer.StateDead:
		a.End, a.Error = r.FinishedAt, r.LastError
	case producer.StateRetrying: // failed on a worker that keeps no history
		a.Outcome, a.Error = "failed", r.LastError
	default: // back in the queue: its worker stopped or vanished
		a.Outcome = "interrupted"
	}
	return a
}

// place sets the axis (the earliest start to the latest end) and each bar on it. A
// row without a start (an older worker's record) is a mark at its end.
func (tl *timeline) place(now time.Time) {
	for _, a := range tl.Attempts {
		for _, t := range []time.Time{a.Start, a.End} {
			if t.IsZero() {
				continue
			}
			if tl.From.IsZero() || t.Before(tl.From) {
				tl.From = t
			}
			if t.After(tl.To) {
				tl.To = t
			}
		}
	}
	span := tl.To.Sub(tl.From)
	tl.Span = shortDuration(span)
	pos := func(t time.Time) float64 {
		if span <= 0 {
			return 0
		}
		return float64(t.Sub(tl.From)) / float64(span) * timelineWidth
	}
	const least = 4 // the narrowest bar, so that a short run still shows
	for i := range tl.Attempts {
		a := &tl.Attempts[i]
		a.Duration = "—"
		var x, w float64
		switch {
		case !a.Start.IsZero() && !a.End.IsZero():
			x, w = pos(a.Start), pos(a.End)-pos(a.Start)
			a.Duration = shortDuration(a.End.Sub(a.Start))
		case !a.End.IsZero():
			x = pos(a.End)
		case !a.Start.IsZero():
			x = pos(a.Start)
		}
		if w < least {
			x, w = min(max(x-least/2, 0), timelineWidth-least), least
		}
		a.X, a.W = strconv.FormatFloat(x, 'f', 1, 64), strconv.FormatFloat(w, 'f', 1, 64)
	}
	if a := tl.Attempts; len(a) > 0 && a[len(a)-1].Open {
		a[len(a)-1].End = time.Time{} // running: shown as such, not as ended now
	}
}
