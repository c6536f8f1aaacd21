package workflow

import (
	"slices"
	"testing"
	"time"

	"github.com/workq/workq/internal/record"
)

func TestTell(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	waiting := func(waitFor []string, failed []string, runIfFailed bool) *record.Record {
		return &record.Record{ID: "w.c", State: record.Waiting, WaitingFor: waitFor, FailedParents: failed, RunIfFailed: runIfFailed, Revision: 9}
	}
	for _, c := range []struct {
		name    string
		rec     *record.Record
		told    Told
		changed bool
		state   record.State
		waiting []string
		failed  []string
	}{
		{"one of two done", waiting([]string{"a", "b"}, nil, false), Told{"a": false}, true, record.Waiting, []string{"b"}, nil},
		{"last done", waiting([]string{"b"}, nil, false), Told{"b": false}, true, record.Queued, nil, nil},
		{"both at once", waiting([]string{"a", "b"}, nil, false), Told{"a": false, "b": false}, true, record.Queued, nil, nil},
		{"told again", waiting([]string{"b"}, nil, false), Told{"a": false}, false, record.Waiting, []string{"b"}, nil},
		{"not a parent", waiting([]string{"b"}, nil, false), Told{"zz": true}, false, record.Waiting, []string{"b"}, nil},
		{"one failed, one left", waiting([]string{"a", "b"}, nil, false), Told{"a": true}, true, record.Waiting, []string{"b"}, []string{"a"}},
		{"last ends after one failed", waiting([]string{"b"}, []string{"a"}, false), Told{"b": false}, true, record.Cancelled, nil, []string{"a"}},
		{"last failed", waiting([]string{"b"}, nil, false), Told{"b": true}, true, record.Cancelled, nil, []string{"b"}},
		{"failed, runs anyway", waiting([]string{"b"}, []string{"a"}, true), Told{"b": true}, true, record.Queued, nil, []string{"a", "b"}},
		{"released already", &record.Record{State: record.Queued}, Told{"a": false}, false, record.Queued, nil, nil},
		{"cancelled already", &record.Record{State: record.Cancelled}, Told{"a": true}, false, record.Cancelled, nil, nil},
		{"running", &record.Record{State: record.Running, WaitingFor: []string{"a"}}, Told{"a": false}, false, record.Running, []string{"a"}, nil},
		{"halts", &record.Record{State: record.Waiting, WaitingFor: []string{"p"}, HaltDead: true}, Told{"p": true}, true, record.Waiting, nil, []string{"p"}},
		{"halted told again", &record.Record{State: record.Waiting, FailedParents: []string{"p"}, HaltDead: true, Halted: true}, Told{"p": true}, false, record.Waiting, nil, []string{"p"}},
		{"halts not when done", &record.Record{State: record.Waiting, WaitingFor: []string{"p"}, HaltDead: true}, Told{"p": false}, true, record.Queued, nil, nil},
	} {
		before := *c.rec
		before.WaitingFor, before.FailedParents = slices.Clone(c.rec.WaitingFor), slices.Clone(c.rec.FailedParents)
		next, changed := Tell(c.rec, c.told, now)
		if changed != c.changed || next.State != c.state || !slices.Equal(next.WaitingFor, c.waiting) || !slices.Equal(next.FailedParents, c.failed) {
			t.Errorf("%s: changed %v, %s, waiting for %v, failed %v; want %v, %s, %v, %v",
				c.name, changed, next.State, next.WaitingFor, next.FailedParents, c.changed, c.state, c.waiting, c.failed)
		}
		if !slices.Equal(c.rec.WaitingFor, before.WaitingFor) || !slices.Equal(c.rec.FailedParents, before.FailedParents) {
			t.Errorf("%s: Tell changed the record it was given", c.name)
		}
		if next.State == record.Cancelled && changed && (next.FinishedAt != now || next.LastError == "") {
			t.Errorf("%s: cancelled without its time or reason: %+v", c.name, next)
		}
		if halted := c.rec.HaltDead && len(c.failed) > 0; next.Halted != halted {
			t.Errorf("%s: halted %v, want %v", c.name, next.Halted, halted)
		}
		if changed && next.Revision != c.rec.Revision {
			t.Errorf("%s: revision %d, want the one read (%d) for the compare-and-set", c.name, next.Revision, c.rec.Revision)
		}
	}
}
