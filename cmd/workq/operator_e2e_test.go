package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
)

// Operator commands and `workq work` flags, end to end.

// freshQueue removes queue q if an earlier run (-count) left it on the test server.
func freshQueue(t *testing.T, q string) {
	t.Helper()
	wq(t, "", "queue", "rm", q, "--yes")
}

// exists says whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// queue ls and queue info tell jobs waiting out a retry backoff from running ones:
// both are delivered and unacknowledged for the workers' consumer.
func TestQueueShowsRetryingApart(t *testing.T) {
	t.Parallel()
	const q = "retrying"
	freshQueue(t, q)
	dir := t.TempDir()
	gate, started := filepath.Join(dir, "gate"), filepath.Join(dir, "started")
	ok(t, `{"id":"hold","payload":"hold"}
{"id":"fail","payload":"fail"}
`, "enqueue", q, "--ndjson")
	// "fail" fails and waits a minute for its retry; "hold" runs until the gate opens.
	w := start(t, "work", q, "-c", "2", "--backoff", "1m", "--backoff-max", "1m", "--", "sh", "-c",
		`[ "$(cat)" = fail ] && exit 3; touch "`+started+`"; while [ ! -e "`+gate+`" ]; do sleep 0.05; done`)
	waitFor(t, 20*time.Second, "hold running and fail retrying", func() bool {
		return exists(started) && getJob(t, q, "hold").State == "running" && getJob(t, q, "fail").State == "retrying"
	})
	var qi queueInfo
	waitFor(t, 10*time.Second, "queue info: 1 running, 1 retrying", func() bool {
		qi = getQueue(t, q)
		return qi.Running == 1 && qi.Retrying == 1
	})
	if qi.AckPending != 2 || qi.Pending != 0 || qi.Jobs != 2 || qi.RetryingPartial {
		t.Errorf("queue info %+v: want 2 jobs, 2 ack pending, 0 pending, an exact count", qi)
	}
	out := ok(t, "", "queue", "ls")
	var header, row []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "QUEUE":
			header = f
		case len(f) > 0 && f[0] == q:
			row = f
		}
	}
	// Columns: QUEUE JOBS PENDING RUNNING RETRYING …
	if len(header) < 5 || header[3] != "RUNNING" || header[4] != "RETRYING" || len(row) < 5 || row[3] != "1" || row[4] != "1" {
		t.Errorf("queue ls: want RUNNING 1 and RETRYING 1 for %s:\n%s", q, out)
	}
	if out := ok(t, "", "queue", "info", q); !strings.Contains(out, "retrying (waiting out a backoff)  1") {
		t.Errorf("queue info does not show 1 retrying:\n%s", out)
	}
	writeFile(t, gate, "")
	waitFor(t, 20*time.Second, "hold done", func() bool { return getJob(t, q, "hold").State == "done" })
	w.stop(t)
}

// queue set --ack-wait changes the workers' AckWait in place: jobs keep their
// delivery state, workers asking for the old value are refused, and it refuses to
// change it under workers that are pulling jobs.
func TestQueueSetAckWait(t *testing.T) {
	t.Parallel()
	const q = "setaw"
	freshQueue(t, q)
	ok(t, "", "enqueue", q, "fail", "--id", "f1")
	// f1 fails and waits out a one-minute backoff: delivered, unacknowledged.
	w := start(t, "work", q, "--ack-wait", "2s", "--backoff", "1m", "--backoff-max", "1m", "--", "sh", "-c", "exit 3")
	waitFor(t, 20*time.Second, "f1 retrying", func() bool { return getJob(t, q, "f1").State == "retrying" })

	// While the worker pulls, set refuses (to the value in place, so that a try that
	// falls between two pulls changes nothing).
	var r result
	waitFor(t, 20*time.Second, "queue set refused while a worker pulls", func() bool {
		r = wq(t, "", "queue", "set", q, "--ack-wait", "2s")
		return r.code != 0
	})
	oneLine(t, r, 1, "workers pulling", "stop them first", "--force")

	w.stop(t)
	waitFor(t, 10*time.Second, "no pull requests left", func() bool { return getQueue(t, q).Waiting == 0 })
	if out := ok(t, "", "queue", "set", q, "--ack-wait", "5s"); !strings.Contains(out, "ack wait 5s (was 2s)") {
		t.Errorf("queue set said %q", out)
	}
	qi := getQueue(t, q)
	if qi.AckWait != "5s" {
		t.Errorf("ack wait after set: %q, want 5s", qi.AckWait)
	}
	// Updated, not re-created: f1 is still delivered and waiting for its retry.
	if qi.AckPending != 1 || qi.Retrying != 1 || qi.Pending != 0 {
		t.Errorf("after set: %+v; want f1 still delivered and retrying (1 ack pending, 1 retrying, 0 pending)", qi)
	}
	// A worker with the old value is refused, naming both.
	oneLine(t, wq(t, "", "work", q, "--ack-wait", "2s", "--", "true"), 1, "--ack-wait 5s", "2s")

	// Usage and missing pieces.
	oneLine(t, wq(t, "", "queue", "set", q), 2, "--ack-wait")
	oneLine(t, wq(t, "", "queue", "set", q, "--ack-wait", "10ms"), 2, "--ack-wait")
	freshQueue(t, q+"-new")
	ok(t, "", "enqueue", q+"-new", "x")
	oneLine(t, wq(t, "", "queue", "set", q+"-new", "--ack-wait", "1m"), 1, "no worker has run yet")
	oneLine(t, wq(t, "", "queue", "set", "missing-q", "--ack-wait", "1m"), 1, "not found")
}

// --max-result above what a job record can hold on the server is a usage error,
// before the queue is touched.
func TestWorkMaxResultAboveMaxPayload(t *testing.T) {
	t.Parallel()
	const q = "maxres"
	freshQueue(t, q)
	// The test server has the default max_payload, 1 MiB: at most what the worker
	// commits (consumer.MaxResultSize).
	most := consumer.MaxResultSize(1 << 20)
	r := wq(t, "", "work", q, "--max-result", strconv.Itoa(most+1), "--", "cat")
	oneLine(t, r, 2, "--max-result "+strconv.Itoa(most+1), "max_payload", strconv.Itoa(most))
	oneLine(t, wq(t, "", "queue", "info", q), 1, "not found")
	oneLine(t, wq(t, "", "work", q, "--max-result", "-1", "--", "cat"), 2, "--max-result")
}

// --prefetch pins how many jobs a worker pulls ahead of its free handlers.
func TestWorkPrefetch(t *testing.T) {
	t.Parallel()
	const q = "prefetch"
	freshQueue(t, q)
	oneLine(t, wq(t, "", "work", q, "--prefetch", "-1", "--", "cat"), 2, "--prefetch")
	ok(t, "1\n2\n3\n4\n5\n6\n", "enqueue", q)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	// One handler, held on the gate: jobs beyond the running one are the buffer.
	// Without the flag the buffer holds Concurrency (1) jobs while the pace is unknown.
	w := start(t, "work", q, "-c", "1", "--prefetch", "3", "--", "sh", "-c",
		`cat >/dev/null; while [ ! -e "`+gate+`" ]; do sleep 0.05; done`)
	waitFor(t, 20*time.Second, "1 running and 3 prefetched", func() bool { return getQueue(t, q).AckPending >= 4 })
	writeFile(t, gate, "")
	waitFor(t, 30*time.Second, "every job done", func() bool { return getQueue(t, q).Jobs == 0 })
	w.stop(t)
}

// dlq purge deletes the dead letters, and only them: waiting jobs and job records stay.
func TestDeadLettersPurged(t *testing.T) {
	t.Parallel()
	const q = "dlqpurge"
	freshQueue(t, q)
	ok(t, "", "enqueue", q, "x", "--id", "p1")
	ok(t, "", "enqueue", q, "y", "--id", "p2")
	w := start(t, "work", q, "--", "sh", "-c", "exit 100")
	waitFor(t, 20*time.Second, "2 dead letters", func() bool { return getQueue(t, q).Dead == 2 })
	w.stop(t)
	ok(t, "", "enqueue", q, "z", "--id", "waiting")

	if out := ok(t, "", "dlq", "purge", q, "--yes"); !strings.Contains(out, "purged 2") {
		t.Errorf("dlq purge said %q, want purged 2", out)
	}
	var dead []struct{}
	okJSON(t, &dead, "dlq", "ls", q, "--json")
	if len(dead) != 0 {
		t.Errorf("%d dead letters after purge", len(dead))
	}
	if qi := getQueue(t, q); qi.Dead != 0 || qi.Jobs != 1 {
		t.Errorf("after purge: %d dead, %d jobs; want 0 dead and the waiting job", qi.Dead, qi.Jobs)
	}
	for _, id := range []string{"p1", "p2"} {
		if r := getJob(t, q, id); r.State != "dead" {
			t.Errorf("record of %s after purge: %q, want dead (untouched)", id, r.State)
		}
	}
	if r := getJob(t, q, "waiting"); r.State != "queued" {
		t.Errorf("waiting job after purge: %q, want queued", r.State)
	}
}

// --timeout kills a command that runs too long; the attempt fails and the job is
// retried, then dead-lettered once its attempts are spent.
func TestWorkTimeoutKillsCommand(t *testing.T) {
	t.Parallel()
	const q = "timeout"
	freshQueue(t, q)
	dir := t.TempDir()
	ok(t, "", "enqueue", q, "x", "--id", "t1")
	w := start(t, "work", q, "--timeout", "500ms", "--max-attempts", "2", "--backoff", "100ms", "--", "sh", "-c",
		`echo $$ > "`+dir+`/$WORKQ_ATTEMPT.tmp" && mv "`+dir+`/$WORKQ_ATTEMPT.tmp" "`+dir+`/$WORKQ_ATTEMPT.pid"; exec sleep 60`)
	waitFor(t, 30*time.Second, "t1 dead after 2 attempts", func() bool { return getJob(t, q, "t1").State == "dead" })
	r := getJob(t, q, "t1")
	if r.Attempt != 2 || !strings.Contains(r.LastError, "timeout 500ms passed") {
		t.Errorf("t1: attempt %d, last error %q; want attempt 2 and the timeout", r.Attempt, r.LastError)
	}
	for _, a := range []string{"1", "2"} {
		pid := readPID(filepath.Join(dir, a+".pid"))
		if pid == 0 {
			t.Errorf("attempt %s did not start its command", a)
			continue
		}
		waitFor(t, 10*time.Second, "attempt "+a+"'s command killed", func() bool { return gone(pid) })
	}
	waitFor(t, 10*time.Second, "both kills logged", func() bool { return strings.Count(w.stderr(), `msg="command killed"`) == 2 })
	w.stop(t)
}

// A command that survives SIGTERM is SIGKILLed --kill-grace later, not sooner.
func TestWorkKillGrace(t *testing.T) {
	t.Parallel()
	const q = "killgrace"
	freshQueue(t, q)
	dir := t.TempDir()
	pidFile, termed := filepath.Join(dir, "pid"), filepath.Join(dir, "termed")
	const grace = time.Second
	ok(t, "", "enqueue", q, "x", "--id", "g1")
	// The shell notes SIGTERM and carries on; only SIGKILL ends it.
	w := start(t, "work", q, "--timeout", "300ms", "--kill-grace", grace.String(), "--max-attempts", "1", "--", "sh", "-c",
		`trap 'touch "`+termed+`"' TERM; echo $$ > "`+pidFile+`.tmp" && mv "`+pidFile+`.tmp" "`+pidFile+`"; while :; do sleep 0.02; done`)
	var pid int
	waitFor(t, 20*time.Second, "the command running", func() bool { pid = readPID(pidFile); return pid > 0 })
	t.Cleanup(func() {
		if !gone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	waitFor(t, 20*time.Second, "the command to get SIGTERM", func() bool { return exists(termed) })
	termedAt := time.Now()
	if gone(pid) {
		t.Fatal("the command died at SIGTERM, which it ignores")
	}
	waitFor(t, 20*time.Second, "the command SIGKILLed", func() bool { return gone(pid) })
	// Seen late by polling, the SIGTERM can only shorten what is measured.
	if lived := time.Since(termedAt); lived < grace/2 {
		t.Errorf("the command was killed %s after SIGTERM, want about --kill-grace %s", lived, grace)
	}
	waitFor(t, 20*time.Second, "g1 dead", func() bool { return getJob(t, q, "g1").State == "dead" })
	w.stop(t)
}

// The first SIGINT/SIGTERM drains and says so; a second one exits at once.
func TestWorkDrainingLogged(t *testing.T) {
	t.Parallel()
	const q = "draining"
	freshQueue(t, q)
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	ok(t, "", "enqueue", q, "x", "--id", "d1")
	w := start(t, "work", q, "--drain-timeout", "1m", "--", "sh", "-c",
		`touch "`+started+`"; exec sleep 60`)
	waitFor(t, 20*time.Second, "the command running", func() bool { return exists(started) })
	w.signal(t, syscall.SIGTERM)
	waitFor(t, 10*time.Second, "the draining line", func() bool {
		return strings.Contains(w.stderr(), "draining") && strings.Contains(w.stderr(), "signal again to exit")
	})
	if w.exited() {
		t.Fatalf("work exited on the first signal while a command ran; stderr: %s", w.stderr())
	}
	w.signal(t, syscall.SIGTERM)
	w.wait(t, 10*time.Second)
}

// workq work logs waiting for an unreachable server at start, losing its
// connection and regaining it.
func TestWorkLogsConnection(t *testing.T) {
	t.Parallel()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	store := filepath.Join(t.TempDir(), "js")
	w := start(t, "work", "connlog", "-s", url, "--wait", "1m", "--", "cat")
	waitFor(t, 20*time.Second, "the waiting line", func() bool { return strings.Contains(w.stderr(), "not reachable yet; waiting") })
	if n := strings.Count(w.stderr(), "not reachable yet"); n != 1 {
		t.Errorf("the waiting line came %d times, want once; stderr: %s", n, w.stderr())
	}
	srv, _, err := startNATSOn(port, "-js", "-sd", store)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the worker started", func() bool { return strings.Contains(w.stderr(), "worker started") })

	stopProcess(srv)
	waitFor(t, 20*time.Second, "the lost-connection line", func() bool { return strings.Contains(w.stderr(), "lost the connection to NATS") })
	srv, _, err = startNATSOn(port, "-js", "-sd", store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(srv) })
	waitFor(t, 30*time.Second, "the reconnected line", func() bool { return strings.Contains(w.stderr(), "reconnected to NATS") })
	// And it still works.
	ok(t, "", "-s", url, "enqueue", "connlog", "after", "--id", "c1")
	waitFor(t, 30*time.Second, "c1 done after the reconnection", func() bool {
		r := wq(t, "", "-s", url, "job", "get", "connlog", "c1")
		return r.code == 0 && strings.Contains(r.stdout, "done")
	})
	// A job's times are shown to the millisecond (issue 25).
	if r := wq(t, "", "-s", url, "job", "get", "connlog", "c1"); !regexp.MustCompile(`(?m)^finished +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$`).MatchString(r.stdout) {
		t.Errorf("job get: its finish is not shown to the millisecond:\n%s", r.stdout)
	}
	w.stop(t)
	if strings.Count(w.stderr(), "lost the connection") != 1 {
		t.Errorf("want one lost-connection line (none for workq's own close at exit); stderr: %s", w.stderr())
	}
}
