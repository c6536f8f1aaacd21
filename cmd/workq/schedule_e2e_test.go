package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// scheduledRecord is the part of `workq job get --json` the scheduling tests read.
type scheduledRecord struct {
	State       string    `json:"state"`
	ScheduledAt time.Time `json:"scheduled_at"`
	Schedule    string    `json:"schedule"`
}

func getScheduled(t *testing.T, q, id string) scheduledRecord {
	t.Helper()
	var r scheduledRecord
	okJSON(t, &r, "job", "get", q, id, "--json")
	return r
}

// enqueue --in and --at, and NDJSON "at"/"after", delay jobs: job get shows them
// scheduled with their time until they fire, then a worker runs them.
func TestEnqueueDelayedJobs(t *testing.T) {
	t.Parallel()
	q := "delayed-cli"
	before := time.Now()
	if out := ok(t, "", "enqueue", q, "soon", "--id", "soon", "--in", "2s"); !strings.HasPrefix(out, "scheduled soon for ") {
		t.Errorf("enqueue --in said %q", out)
	}
	at := time.Now().Add(3 * time.Second).UTC().Truncate(time.Second)
	out := ok(t, `{"id":"nd-at","payload":"a","at":"`+at.Format(time.RFC3339)+`"}
{"id":"nd-after","payload":"b","after":"2s"}
{"id":"nd-now","payload":"c"}
`, "enqueue", q, "--ndjson", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var scheduled []string
	for _, l := range lines {
		var info struct {
			ID          string    `json:"id"`
			ScheduledAt time.Time `json:"scheduled_at"`
		}
		if err := json.Unmarshal([]byte(l), &info); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		if !info.ScheduledAt.IsZero() {
			scheduled = append(scheduled, info.ID)
		}
	}
	if strings.Join(scheduled, ",") != "nd-at,nd-after" {
		t.Errorf("scheduled %v, want nd-at,nd-after", scheduled)
	}
	if r := getScheduled(t, q, "nd-at"); r.State != "scheduled" || !r.ScheduledAt.Equal(at) {
		t.Errorf("nd-at: %+v, want scheduled for %v", r, at)
	}
	if out := ok(t, "", "job", "get", q, "soon"); !strings.Contains(out, "scheduled for") {
		t.Errorf("job get of a scheduled job:\n%s", out)
	}
	w := start(t, "work", q, "--", "sh", "-c", "date +%s.%N")
	waitFor(t, 20*time.Second, "every job done", func() bool {
		for _, id := range []string{"soon", "nd-at", "nd-after", "nd-now"} {
			if getJob(t, q, id).State != "done" {
				return false
			}
		}
		return true
	})
	w.stop(t)
	if r := getScheduled(t, q, "nd-at"); !r.ScheduledAt.Equal(at) {
		t.Errorf("nd-at's record lost its due time: %+v", r)
	}
	// Each job's result is the time its command started, in seconds.
	for id, due := range map[string]time.Time{"nd-at": at, "soon": before.Add(2 * time.Second)} {
		var secs float64
		if err := json.Unmarshal([]byte(strings.TrimSpace(string(getJob(t, q, id).Result))), &secs); err != nil {
			t.Fatalf("%s result %q", id, getJob(t, q, id).Result)
		}
		if started := time.Unix(0, int64(secs*1e9)); started.Before(due) {
			t.Errorf("%s started %v before its time", id, due.Sub(started))
		}
	}
}

// Bad delays are usage errors, or per-line errors for NDJSON.
func TestEnqueueDelayedBadInput(t *testing.T) {
	t.Parallel()
	q := "delayed-bad"
	oneLine(t, wq(t, "", "enqueue", q, "x", "--at", "tomorrow"), 2, "--at", "RFC 3339")
	oneLine(t, wq(t, "", "enqueue", q, "x", "--at", "2030-01-01T00:00:00Z", "--in", "1m"), 2, "exclude")
	oneLine(t, wq(t, "", "enqueue", q, "x", "--in", "-5s"), 2, "--in")
	r := wq(t, `{"payload":"x","at":"2030-01-01T00:00:00Z","after":"1m"}
{"payload":"y","after":"soon"}
`, "enqueue", q, "--ndjson")
	if r.code != 1 || !strings.Contains(r.stderr, "at and after exclude each other") || !strings.Contains(r.stderr, `after "soon"`) {
		t.Errorf("exit %d, stderr %s", r.code, r.stderr)
	}
}

// job cancel cancels scheduled and queued jobs and says why it cannot cancel others.
func TestJobCancel(t *testing.T) {
	t.Parallel()
	q := "cancel-cli"
	ok(t, "", "enqueue", q, "x", "--id", "later-1", "--in", "1h")
	ok(t, "", "enqueue", q, "x", "--id", "now-1")
	if out := ok(t, "", "job", "cancel", q, "later-1"); !strings.Contains(out, "later-1: cancelled") {
		t.Errorf("cancel said %q", out)
	}
	if r := getScheduled(t, q, "later-1"); r.State != "cancelled" || r.ScheduledAt.IsZero() {
		t.Errorf("record after cancel: %+v", r)
	}
	if out := ok(t, "", "job", "cancel", q, "later-1"); !strings.Contains(out, "later-1: cancelled") {
		t.Errorf("second cancel said %q", out)
	}
	r := wq(t, "", "job", "cancel", q, "now-1", "nobody")
	if r.code != 1 || !strings.Contains(r.stdout, "now-1: cancelled (was queued)") ||
		!strings.Contains(r.stdout, "nobody: not cancelled: cancel job nobody on queue cancel-cli: job not found") || !strings.Contains(r.stderr, "1 of 2 jobs not cancelled") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if q := getQueue(t, q); q.Jobs != 0 {
		t.Errorf("the cancelled job's message is still in the queue: %+v", q)
	}
}

// schedule add, ls, get, pause, resume and rm; the schedule fires jobs; bad specs
// are usage errors.
func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	q := "sched-cli"
	out := ok(t, "", "schedule", "add", q, "nightly", `{"report":"sales"}`, "--cron", "0 2 * * *", "--tz", "Europe/Berlin", "--kind", "report")
	if !strings.Contains(out, "TZ=Europe/Berlin 0 2 * * *") || !strings.Contains(out, "next firing") || !strings.Contains(out, "active") {
		t.Errorf("schedule add said:\n%s", out)
	}
	ok(t, "", "schedule", "add", q, "tick", "t", "--every", "1s")
	waitFor(t, 10*time.Second, "the tick schedule to fire twice", func() bool { return getQueue(t, q).Jobs >= 2 })
	ok(t, "", "schedule", "pause", q, "tick")
	ls := ok(t, "", "schedule", "ls", q)
	if !strings.Contains(ls, "nightly") || !strings.Contains(ls, "tick") || !strings.Contains(ls, "paused") {
		t.Errorf("schedule ls:\n%s", ls)
	}
	var list []struct {
		Name   string    `json:"name"`
		Paused bool      `json:"paused"`
		Next   time.Time `json:"next"`
	}
	okJSON(t, &list, "schedule", "ls", q, "--json")
	if len(list) != 2 || list[0].Name != "nightly" || list[0].Paused || list[0].Next.In(mustZone(t, "Europe/Berlin")).Hour() != 2 ||
		list[1].Name != "tick" || !list[1].Paused || !list[1].Next.IsZero() {
		t.Errorf("schedule ls --json: %+v", list)
	}
	if out := ok(t, "", "schedule", "resume", q, "tick"); !strings.Contains(out, "active") {
		t.Errorf("resume said %q", out)
	}
	ok(t, "", "schedule", "rm", q, "tick")
	if got := ok(t, "", "schedule", "get", q, "nightly"); !strings.Contains(got, "report") {
		t.Errorf("schedule get:\n%s", got)
	}
	oneLine(t, wq(t, "", "schedule", "get", q, "tick"), 1, "not found")
	oneLine(t, wq(t, "", "schedule", "add", q, "fast", "--every", "100ms"), 2, "too often")
	oneLine(t, wq(t, "", "schedule", "add", q, "bad", "--cron", "61 * * * *"), 2, "61")
	oneLine(t, wq(t, "", "schedule", "add", q, "mars", "--cron", "@daily", "--tz", "Mars/Olympus"), 2, "Mars/Olympus")
	oneLine(t, wq(t, "", "schedule", "add", q, "none"), 2, "--cron or --every")
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
