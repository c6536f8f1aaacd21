package main_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// job ls lists a queue's jobs by state, a page at a time, and follows its own cursor
// line; a bad --state is a usage error.
func TestJobLs(t *testing.T) {
	t.Parallel()
	const q = "jobls"
	ok(t, "a\nb\nc\n", "enqueue", q, "--kind", "mail")
	ok(t, "", "enqueue", q, "x", "--id", "later", "--in", "1h")
	out := ok(t, "", "job", "ls", q, "--state", "queued", "--limit", "2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "queued") || !strings.Contains(lines[1], "mail") {
		t.Fatalf("first page:\n%s", out)
	}
	more, ok2 := strings.CutPrefix(lines[3], "more: workq ")
	if !ok2 || !strings.Contains(more, "--state queued --limit 2") {
		t.Fatalf("no cursor line:\n%s", out)
	}
	next := ok(t, "", strings.Fields(more)...)
	if n := strings.Count(next, "queued"); n != 1 || strings.Contains(next, "more:") {
		t.Errorf("second page: want the third queued job and no more:\n%s", next)
	}
	if out := ok(t, "", "job", "ls", q, "--state", "scheduled"); !strings.Contains(out, "later") || strings.Contains(out, "mail") {
		t.Errorf("scheduled:\n%s", out)
	}
	var page struct {
		Jobs []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"jobs"`
	}
	okJSON(t, &page, "job", "ls", q, "--json")
	if len(page.Jobs) != 4 {
		t.Errorf("--json listed %+v; want 4 jobs", page.Jobs)
	}
	oneLine(t, wq(t, "", "job", "ls", q, "--state", "sleeping"), 2, "--state", "want scheduled")
}

// enqueue --priority and NDJSON "priority" put jobs on their level, which job ls and
// queue info count like any job; a level that does not exist is refused.
func TestEnqueuePriority(t *testing.T) {
	t.Parallel()
	const q = "prio-cli"
	ok(t, "", "enqueue", q, "x", "--id", "urgent-1", "--priority", "4")
	ok(t, "", "enqueue", q, "x", "--id", "high-1", "--priority", "high") // by name (issue 25)
	ok(t, `{"id":"low-1","priority":1}`+"\n"+`{"id":"normal-1"}`+"\n"+`{"id":"low-2","priority":"low"}`+"\n", "enqueue", q, "--ndjson")
	if qi := getQueue(t, q); qi.Jobs != 5 || qi.Pending != 5 {
		t.Errorf("queue info: %+v; want 5 jobs pending", qi)
	}
	// Each on its level's subject.
	js := jsClient(t, serverURL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "WORKQ_"+q)
	if err != nil {
		t.Fatal(err)
	}
	for id, subject := range map[string]string{"urgent-1": "prio.4.urgent-1", "high-1": "prio.3.high-1", "low-1": "prio.1.low-1",
		"low-2": "prio.1.low-2", "normal-1": "jobs.normal-1"} {
		if _, err := s.GetLastMsgForSubject(ctx, "workq."+q+"."+subject); err != nil {
			t.Errorf("%s not on workq.%s.%s: %v", id, q, subject, err)
		}
	}
	out := ok(t, "", "job", "ls", q, "--state", "queued")
	for _, id := range []string{"urgent-1", "high-1", "low-1", "normal-1", "low-2"} {
		if !strings.Contains(out, id) {
			t.Errorf("job ls lacks %s:\n%s", id, out)
		}
	}
	oneLine(t, wq(t, "", "enqueue", q, "x", "--priority", "5"), 2, "priority 5", "want low, normal, high or urgent")
	oneLine(t, wq(t, "", "enqueue", q, "x", "--priority", "highest"), 2, "priority highest")
	r := wq(t, `{"id":"bad","priority":9}`+"\n", "enqueue", q, "--ndjson")
	if r.code != 1 || !strings.Contains(r.stderr, "priority 9") {
		t.Errorf("exit %d, stderr %s", r.code, r.stderr)
	}
}
