package ui

import (
	"testing"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// A job's attempts, oldest first, on one time axis: the failed ones from its
// history of errors, the last from the record (done, running with its progress,
// dead, cancelled); a record of an older worker (no start, no worker) still shows
// each failure, as a mark at its end.
func TestTimelineOf(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	failed := func(n int, from, to float64, worker string) producer.AttemptError {
		return producer.AttemptError{Attempt: n, Started: at(from), At: at(to), Worker: worker, Error: "boom " + worker}
	}
	type row struct {
		n              int
		outcome, x, w  string
		worker, took   string
		open, progress bool
	}
	for _, c := range []struct {
		name    string
		rec     admin.Record
		want    []row
		missing int
	}{
		{"failed twice, then done", admin.Record{
			State: producer.StateDone, Attempt: 3, StartedAt: at(8), FinishedAt: at(10), Worker: producer.WorkerInfo{Name: "w3"},
			Errors: []producer.AttemptError{failed(1, 0, 2, "w1"), failed(2, 4, 5, "w2")},
		}, []row{
			{n: 1, outcome: "failed", x: "0.0", w: "200.0", worker: "w1", took: "2s"},
			{n: 2, outcome: "failed", x: "400.0", w: "100.0", worker: "w2", took: "1s"},
			{n: 3, outcome: "done", x: "800.0", w: "200.0", worker: "w3", took: "2s"},
		}, 0},
		{"running, with progress", admin.Record{
			State: producer.StateRunning, Attempt: 2, StartedAt: at(5), Worker: producer.WorkerInfo{Name: "w"},
			Progress: 0.5, ProgressAt: at(7), Errors: []producer.AttemptError{failed(1, 0, 1, "w")},
		}, []row{
			{n: 1, outcome: "failed", x: "0.0", w: "100.0", worker: "w", took: "1s"},
			{n: 2, outcome: "running", x: "500.0", w: "500.0", worker: "w", took: "5s", open: true, progress: true},
		}, 0},
		{"dead: the last failure ran out of attempts; the first ones not kept", admin.Record{
			State: producer.StateDead, Attempt: 12, StartedAt: at(9), FinishedAt: at(10),
			Errors: []producer.AttemptError{failed(11, 0, 1, "w"), failed(12, 9, 10, "w")},
		}, []row{
			{n: 11, outcome: "failed", x: "0.0", w: "100.0", worker: "w", took: "1s"},
			{n: 12, outcome: "dead", x: "900.0", w: "100.0", worker: "w", took: "1s"},
		}, 10},
		{"cancelled while waiting out a retry", admin.Record{
			State: producer.StateCancelled, Attempt: 1, StartedAt: at(0), FinishedAt: at(10),
			Errors: []producer.AttemptError{failed(1, 0, 2, "w")},
		}, []row{
			{n: 1, outcome: "failed", x: "0.0", w: "200.0", worker: "w", took: "2s"},
			{n: 0, outcome: "cancelled", x: "996.0", w: "4.0", took: "—"},
		}, 0},
		{"cancelled before it ran", admin.Record{State: producer.StateCancelled, FinishedAt: at(3)},
			[]row{{n: 0, outcome: "cancelled", x: "0.0", w: "4.0", took: "—"}}, 0},
		{"an older worker's record: no start, no worker", admin.Record{
			State: producer.StateRetrying, Attempt: 2, StartedAt: at(4),
			Errors: []producer.AttemptError{{Attempt: 1, At: at(0), Error: "x"}, {Attempt: 2, At: at(10), Error: "y"}},
		}, []row{
			{n: 1, outcome: "failed", x: "0.0", w: "4.0", took: "—"},
			{n: 2, outcome: "failed", x: "996.0", w: "4.0", took: "—"},
		}, 0},
		{"not run yet", admin.Record{State: producer.StateQueued}, nil, 0},
	} {
		tl := timelineOf(&c.rec, at(10))
		if len(tl.Attempts) != len(c.want) || tl.Missing != c.missing {
			t.Errorf("%s: %d rows, %d missing; want %d, %d: %+v", c.name, len(tl.Attempts), tl.Missing, len(c.want), c.missing, tl.Attempts)
			continue
		}
		for i, w := range c.want {
			a := tl.Attempts[i]
			if a.N != w.n || a.Outcome != w.outcome || a.X != w.x || a.W != w.w || a.Worker != w.worker || a.Duration != w.took ||
				a.Open != w.open || a.HasProgress != w.progress || (w.open && !a.End.IsZero()) {
				t.Errorf("%s: row %d = %+v; want %+v", c.name, i, a, w)
			}
		}
	}
}
