package main_test

import (
	"strings"
	"testing"
	"time"
)

// queue pause stops a running `workq work` from getting jobs, queue ls and info say
// so, and queue resume lets it run them; pausing a queue without workers says why.
func TestQueuePauseResume(t *testing.T) {
	t.Parallel()
	const q = "pause-cli"
	ok(t, "", "enqueue", q, "first")
	r := wq(t, "", "queue", "pause", q)
	oneLine(t, r, 1, "no workers' consumer")

	w := start(t, "work", q, "--", "true")
	waitFor(t, 30*time.Second, "the first job done", func() bool { return getQueue(t, q).Jobs == 0 })
	if out := ok(t, "", "queue", "pause", q); !strings.Contains(out, "paused queue "+q) {
		t.Errorf("pause said %q", out)
	}
	ok(t, "", "enqueue", q, "second")
	time.Sleep(2 * time.Second) // longer than the worker's pull requests last
	if qi := getQueue(t, q); !qi.Paused || qi.Jobs != 1 {
		t.Fatalf("paused queue: %+v; want paused with its job waiting", qi)
	}
	if ls := ok(t, "", "queue", "ls"); !strings.Contains(ls, "STATE") || !strings.Contains(lineOf(ls, q), "paused") {
		t.Errorf("queue ls:\n%s", ls)
	}
	if out := ok(t, "", "queue", "resume", q); !strings.Contains(out, "resumed queue "+q) {
		t.Errorf("resume said %q", out)
	}
	waitFor(t, 10*time.Second, "the second job done", func() bool { return getQueue(t, q).Jobs == 0 })
	if qi := getQueue(t, q); qi.Paused {
		t.Errorf("resumed queue still paused: %+v", qi)
	}
	w.stop(t)
}

// lineOf is the line of out that starts with prefix and a space.
func lineOf(out, prefix string) string {
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, prefix+" ") {
			return l
		}
	}
	return ""
}
