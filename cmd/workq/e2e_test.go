package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestEnqueueFromStdinAndFile(t *testing.T) {
	t.Parallel()
	q := "enq"
	if out := ok(t, "a\nb\n\nc\n", "enqueue", q); !strings.Contains(out, "enqueued 3 job(s)") {
		t.Errorf("stdin enqueue said %q", out)
	}
	dir := t.TempDir()
	nd := filepath.Join(dir, "jobs.ndjson")
	writeFile(t, nd, `{"id":"f1","payload":"hello","kind":"mail","headers":{"X-A":"1"}}`+"\n"+`{"id":"f2","payload":{"x":1}}`+"\n")
	out := ok(t, "", "enqueue", q, "--file", nd, "--ndjson", "--json")
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var info struct {
			ID       string `json:"id"`
			Sequence uint64 `json:"sequence"`
		}
		if err := json.Unmarshal([]byte(line), &info); err != nil || info.Sequence == 0 {
			t.Fatalf("--json line %q: %v", line, err)
		}
		ids = append(ids, info.ID)
	}
	if strings.Join(ids, ",") != "f1,f2" {
		t.Errorf("ids %v, want f1,f2", ids)
	}
	plain := filepath.Join(dir, "plain.txt")
	writeFile(t, plain, "one\ntwo\n")
	ok(t, "", "enqueue", q, "-f", plain, "--kind", "k", "-H", "X-B=2")
	if out := ok(t, "", "enqueue", q, "again", "--id", "f1"); !strings.Contains(out, "duplicate") {
		t.Errorf("re-enqueue of f1 said %q, want duplicate", out)
	}
	if qi := getQueue(t, q); qi.Jobs != 7 {
		t.Errorf("queue holds %d jobs, want 7", qi.Jobs)
	}
	if r := getJob(t, q, "f1"); r.State != "queued" {
		t.Errorf("f1 is %q, want queued", r.State)
	}
	// Any text is an id, shown as given (issue 25: '@' was refused).
	ok(t, "", "enqueue", q, "hi", "--id", "ada@example.com")
	if r := getJob(t, q, "ada@example.com"); r.State != "queued" || r.ID != "ada@example.com" {
		t.Errorf("job get ada@example.com: %+v", r)
	}
	if out := ok(t, "", "job", "ls", q); !strings.Contains(out, "ada@example.com") {
		t.Errorf("job ls does not show ada@example.com:\n%s", out)
	}

	// Bad lines fail by name; the good ones are enqueued; the exit is non-zero.
	r := wq(t, `{"id":"g1","payload":"ok"}`+"\n"+`not json`+"\n"+`{"id":"bad\u0007id","payload":"x"}`+"\n", "enqueue", q, "--ndjson")
	oneLine(t, r, 1, "2 job(s) failed", "line 2", `bad\aid`, "control character")
	if rec := getJob(t, q, "g1"); rec.State != "queued" {
		t.Errorf("g1 is %q, want queued", rec.State)
	}
}

func TestWorkRunsShellCommand(t *testing.T) {
	t.Parallel()
	q := "work"
	ok(t, `{"id":"ok-1","payload":"hello"}
{"id":"ok-2","payload":"world"}
{"id":"perm-1","payload":"perm"}
{"id":"retry-1","payload":"retry"}
`, "enqueue", q, "--ndjson")
	script := `p=$(cat)
case "$p" in
perm) echo "cannot do $p" >&2; exit 100;;
retry) [ "$WORKQ_ATTEMPT" -ge 2 ] || { echo "not yet" >&2; exit 3; };;
esac
printf '%s|%s|%s|%s' "$p" "$WORKQ_JOB_ID" "$WORKQ_ATTEMPT" "$WORKQ_FENCING_TOKEN"`
	w := start(t, "work", q, "-c", "2", "--backoff", "100ms", "--max-attempts", "3", "--", "sh", "-c", script)
	waitFor(t, 20*time.Second, "every job finished", func() bool {
		return getJob(t, q, "ok-1").State == "done" && getJob(t, q, "ok-2").State == "done" &&
			getJob(t, q, "retry-1").State == "done" && getJob(t, q, "perm-1").State == "dead"
	})
	r := getJob(t, q, "ok-1")
	parts := strings.Split(string(r.Result), "|")
	if len(parts) != 4 || parts[0] != "hello" || parts[1] != "ok-1" || parts[2] != "1" {
		t.Errorf("ok-1 result %q, want hello|ok-1|1|<token>", r.Result)
	} else if tok, err := strconv.Atoi(parts[3]); err != nil || tok <= 0 {
		t.Errorf("fencing token %q", parts[3])
	}
	if r := getJob(t, q, "retry-1"); r.Attempt != 2 || !strings.HasPrefix(string(r.Result), "retry|retry-1|2|") {
		t.Errorf("retry-1: attempt %d result %q", r.Attempt, r.Result)
	}
	if r := getJob(t, q, "perm-1"); !strings.Contains(r.LastError, "status 100") || !strings.Contains(r.LastError, "cannot do perm") {
		t.Errorf("perm-1 last error %q", r.LastError)
	}
	w.stop(t)
	if !strings.Contains(w.stderr(), "worker stopped") || !strings.Contains(w.stderr(), "not yet") {
		t.Errorf("stderr lacks the stop line or the command's stderr: %s", w.stderr())
	}
}

func TestDeadLettersListedAndRequeued(t *testing.T) {
	t.Parallel()
	q := "dlq"
	ok(t, "p1\np2\np3\n", "enqueue", q)
	ok(t, "first\n", "enqueue", q, "--raw", "--id", "d1")
	// Dead-letter everything.
	w := start(t, "work", q, "-c", "4", "--", "sh", "-c", "echo refusing >&2; exit 100")
	var dead []struct {
		Sequence uint64 `json:"sequence"`
		JobID    string `json:"job_id"`
		Error    string `json:"error"`
	}
	waitFor(t, 20*time.Second, "4 dead letters", func() bool {
		okJSON(t, &dead, "dlq", "ls", q, "--json")
		return len(dead) == 4
	})
	w.signal(t, syscall.SIGTERM)
	w.wait(t, 15*time.Second)
	if !strings.Contains(dead[0].Error, "status 100") {
		t.Errorf("dead letter error %q", dead[0].Error)
	}
	if out := ok(t, "", "dlq", "ls", q); !strings.Contains(out, "d1") || !strings.Contains(out, "ATTEMPTS") {
		t.Errorf("dlq ls:\n%s", out)
	}
	if out := ok(t, "", "dlq", "show", q, "d1", "--payload"); out != "first\n" {
		t.Errorf("dlq show --payload = %q", out)
	}
	if out := ok(t, "", "dlq", "show", q, "d1"); !strings.Contains(out, "refusing") {
		t.Errorf("dlq show:\n%s", out)
	}

	// Requeue one by id (with a kind, which it runs with: issue 25), then the rest.
	if out := ok(t, "", "dlq", "requeue", q, "d1", "--kind", "report"); !strings.Contains(out, "requeued d1") {
		t.Errorf("requeue d1 said %q", out)
	}
	okJSON(t, &dead, "dlq", "ls", q, "--json")
	if len(dead) != 3 {
		t.Fatalf("%d dead letters after requeuing one, want 3", len(dead))
	}
	ok(t, "", "dlq", "requeue", q, "--all")
	okJSON(t, &dead, "dlq", "ls", q, "--json")
	if len(dead) != 0 {
		t.Fatalf("%d dead letters after requeue --all", len(dead))
	}
	if qi := getQueue(t, q); qi.Jobs != 4 {
		t.Fatalf("queue holds %d jobs after requeue, want 4", qi.Jobs)
	}
	r := wq(t, "", "dlq", "requeue", q, "nope")
	oneLine(t, r, 1, "no such dead letter", "nope")

	// Now they succeed; each runs as a new instance of its job.
	w = start(t, "work", q, "-c", "4", "--", "cat")
	waitFor(t, 20*time.Second, "requeued jobs done", func() bool { return getQueue(t, q).Jobs == 0 })
	waitFor(t, 10*time.Second, "d1 done", func() bool { return getJob(t, q, "d1").State == "done" })
	if r := getJob(t, q, "d1"); string(r.Result) != "first\n" || r.Kind != "report" {
		t.Errorf("d1 result %q, kind %q; want its payload, and the kind it was requeued with", r.Result, r.Kind)
	}
	w.signal(t, syscall.SIGTERM)
	w.wait(t, 15*time.Second)
	oneLine(t, wq(t, "", "dlq", "purge", q), 2, "--yes")
	if out := ok(t, "", "dlq", "purge", q, "--yes"); !strings.Contains(out, "purged 0") {
		t.Errorf("dlq purge said %q", out)
	}
}

func TestStalledWorkerCommitRefused(t *testing.T) {
	t.Parallel()
	q := "stall"
	dir := t.TempDir()
	gate, started, finished := filepath.Join(dir, "gate"), filepath.Join(dir, "A-started"), filepath.Join(dir, "A-finished")
	ok(t, "", "enqueue", q, "payload", "--id", "s1")
	// A's command runs until the test opens the gate, so A is surely mid-job when it
	// is frozen, and finishes only once B owns the job.
	a := start(t, "work", q, "--ack-wait", "1s", "--name", "A", "--", "sh", "-c",
		`touch "`+started+`"; cat >/dev/null; while [ ! -e "`+gate+`" ]; do sleep 0.05; done; echo A; touch "`+finished+`"`)
	// The claim is written before the command starts: wait for both, or A could be
	// frozen between the two and never start the command the test waits for below.
	waitFor(t, 10*time.Second, "A running s1", func() bool {
		if _, err := os.Stat(started); err != nil {
			return false
		}
		r := getJob(t, q, "s1")
		return r.State == "running" && r.Worker != nil && r.Worker.Name == "A"
	})
	a.signal(t, syscall.SIGSTOP)
	defer func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) }()
	b := start(t, "work", q, "--ack-wait", "1s", "--name", "B", "--", "sh", "-c", "cat >/dev/null; echo B")
	waitFor(t, 15*time.Second, "B committing s1", func() bool {
		r := getJob(t, q, "s1")
		return r.State == "done" && r.Worker != nil && r.Worker.Name == "B"
	})
	// A's command completes while A is still frozen; A then tries to commit it.
	writeFile(t, gate, "")
	waitFor(t, 10*time.Second, "A's command finished", func() bool { _, err := os.Stat(finished); return err == nil })
	a.signal(t, syscall.SIGCONT)
	waitFor(t, 15*time.Second, "A's commit refused", func() bool { return strings.Contains(a.stderr(), "job s1 was reassigned") })
	if r := getJob(t, q, "s1"); string(r.Result) != "B\n" || r.Attempt != 2 {
		t.Errorf("s1: result %q attempt %d, want B's result on attempt 2", r.Result, r.Attempt)
	}
	for _, p := range []*proc{a, b} {
		p.stop(t)
	}
	if strings.Contains(b.stderr(), "was reassigned") {
		t.Errorf("B logged a reassignment: %s", b.stderr())
	}
}

func TestKilledWorkerJobsRedelivered(t *testing.T) {
	t.Parallel()
	q := "kill"
	ok(t, "", "enqueue", q, "x", "--id", "k1")
	ok(t, "", "enqueue", q, "y", "--id", "k2")
	dir := t.TempDir()
	a := start(t, "work", q, "-c", "2", "--ack-wait", "1s", "--", "sh", "-c",
		`echo $$ > "`+dir+`/$WORKQ_JOB_ID.tmp" && mv "`+dir+`/$WORKQ_JOB_ID.tmp" "`+dir+`/$WORKQ_JOB_ID.pid"; exec sleep 30`)
	pids := func() []int {
		var out []int
		for _, id := range []string{"k1", "k2"} {
			if pid := readPID(filepath.Join(dir, id+".pid")); pid > 0 {
				out = append(out, pid)
			}
		}
		return out
	}
	waitFor(t, 10*time.Second, "both jobs running", func() bool { return len(pids()) == 2 })
	t.Cleanup(func() {
		for _, pid := range pids() {
			if !gone(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	a.signal(t, syscall.SIGKILL)
	a.wait(t, 5*time.Second)
	if runtime.GOOS == "linux" {
		// The commands die with their worker rather than run on unowned.
		waitFor(t, 10*time.Second, "the killed worker's commands gone", func() bool {
			for _, pid := range pids() {
				if !gone(pid) {
					return false
				}
			}
			return true
		})
	}
	b := start(t, "work", q, "-c", "2", "--ack-wait", "1s", "--", "sh", "-c", `echo "B-$WORKQ_ATTEMPT"`)
	waitFor(t, 15*time.Second, "both jobs redelivered and done", func() bool {
		return getJob(t, q, "k1").State == "done" && getJob(t, q, "k2").State == "done"
	})
	for _, id := range []string{"k1", "k2"} {
		if r := getJob(t, q, id); string(r.Result) != "B-2\n" {
			t.Errorf("%s result %q, want B-2 (attempt 2 on the second worker)", id, r.Result)
		}
	}
	b.signal(t, syscall.SIGTERM)
	b.wait(t, 15*time.Second)
}

func TestLockRunExcludes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, gate := filepath.Join(dir, "in"), filepath.Join(dir, "gate")
	// The first command holds the lock until the test opens the gate.
	first := start(t, "lock", "run", "L1", "--", "sh", "-c",
		`touch "`+in+`"; while [ ! -e "`+gate+`" ]; do sleep 0.05; done; rm "`+in+`"; echo "first $WORKQ_LOCK_TOKEN"`)
	waitFor(t, 10*time.Second, "the first command running", func() bool { _, err := os.Stat(in); return err == nil })

	var info struct {
		Held bool `json:"held"`
		PID  int  `json:"pid"`
	}
	okJSON(t, &info, "lock", "info", "L1", "--json")
	if !info.Held || info.PID != first.cmd.Process.Pid {
		t.Errorf("lock info %+v, want held by pid %d", info, first.cmd.Process.Pid)
	}
	if out := ok(t, "", "lock", "ls"); !strings.Contains(out, "L1") {
		t.Errorf("lock ls:\n%s", out)
	}
	oneLine(t, wq(t, "", "lock", "run", "-n", "L1", "--", "true"), 1, "held by")
	r := wq(t, "", "lock", "run", "--timeout", "300ms", "L1", "--", "true")
	oneLine(t, r, 1, "L1")

	// A waiting run gets the lock only once the first command is done: it is
	// waiting (it said so), and has not run its command, while the first holds.
	second := start(t, "lock", "run", "-v", "L1", "--", "sh", "-c", `test ! -e "`+in+`" && echo "second $WORKQ_LOCK_TOKEN"`)
	waitFor(t, 10*time.Second, "the second run waiting", func() bool { return strings.Contains(second.stderr(), "waiting") })
	if !strings.Contains(second.stderr(), "held by") || second.stdout() != "" || second.exited() {
		t.Fatalf("second lock run did not wait for the first: stdout %q, stderr %q", second.stdout(), second.stderr())
	}
	okJSON(t, &info, "lock", "info", "L1", "--json")
	if !info.Held || info.PID != first.cmd.Process.Pid || second.stdout() != "" {
		t.Fatalf("lock info %+v, second's stdout %q: want L1 still held by the first run (pid %d)", info, second.stdout(), first.cmd.Process.Pid)
	}
	writeFile(t, gate, "")
	if code := first.wait(t, 10*time.Second); code != 0 || !strings.HasPrefix(first.stdout(), "first ") {
		t.Errorf("first lock run: exit %d, stdout %q", code, first.stdout())
	}
	if code := second.wait(t, 15*time.Second); code != 0 || !strings.HasPrefix(second.stdout(), "second ") {
		t.Errorf("second lock run: exit %d (ran while the first held the lock?), stdout %q, stderr %q", code, second.stdout(), second.stderr())
	}
	var t1, t2 uint64
	_, err1 := fmt.Sscanf(first.stdout(), "first %d", &t1)
	_, err2 := fmt.Sscanf(second.stdout(), "second %d", &t2)
	if err1 != nil || err2 != nil || t2 <= t1 {
		t.Errorf("tokens: first %q, second %q; want the second greater", first.stdout(), second.stdout())
	}
	if !strings.Contains(second.stderr(), "took lock") {
		t.Errorf("second lock run -v did not say it took the lock: %q", second.stderr())
	}
	if r := wq(t, "", "lock", "run", "L2", "--", "sh", "-c", "exit 7"); r.code != 7 {
		t.Errorf("lock run passed on exit %d, want 7", r.code)
	}

	// acquire / release by token.
	tok := strings.TrimSpace(ok(t, "", "lock", "acquire", "L3", "-q", "--ttl", "30s"))
	if _, err := strconv.ParseUint(tok, 10, 64); err != nil {
		t.Fatalf("lock acquire -q printed %q", tok)
	}
	oneLine(t, wq(t, "", "lock", "acquire", "-n", "L3"), 1, "held by")
	oneLine(t, wq(t, "", "lock", "release", "L3", "--token", "1"), 1, "not released")
	ok(t, "", "lock", "release", "L3", "--token", tok)
	if out := ok(t, "", "lock", "info", "L3"); !strings.Contains(out, "free") {
		t.Errorf("lock info after release: %s", out)
	}
}

func TestQueueAdmin(t *testing.T) {
	t.Parallel()
	q := "adm"
	ok(t, "1\n2\n", "enqueue", q)
	var qs []struct {
		Name string `json:"name"`
		Jobs int    `json:"jobs"`
	}
	okJSON(t, &qs, "queue", "ls", "--json")
	found := false
	for _, x := range qs {
		found = found || x.Name == q && x.Jobs == 2
	}
	if !found {
		t.Errorf("queue ls --json lacks %s with 2 jobs: %+v", q, qs)
	}
	if out := ok(t, "", "queue", "ls"); !strings.Contains(out, q) || !strings.Contains(out, "PENDING") {
		t.Errorf("queue ls:\n%s", out)
	}
	oneLine(t, wq(t, "", "queue", "purge", q), 2, "--yes")
	if out := ok(t, "", "queue", "purge", q, "--yes"); !strings.Contains(out, "purged 2") {
		t.Errorf("purge said %q", out)
	}
	if qi := getQueue(t, q); qi.Jobs != 0 {
		t.Errorf("%d jobs after purge", qi.Jobs)
	}
	ok(t, "", "queue", "rm", q, "--yes")
	oneLine(t, wq(t, "", "queue", "info", q), 1, "queue adm not found")
}

func TestErrorsAreOneClearLine(t *testing.T) {
	t.Parallel()
	oneLine(t, wq(t, "", "queue", "ls", "--bogus"), 2, "unknown flag: --bogus")
	oneLine(t, wq(t, "", "enqueue"), 2, "<queue>")
	oneLine(t, wq(t, "", "work", "q"), 2, "-- command")
	oneLine(t, wq(t, "", "work", "q", "--"), 2, "no command")
	oneLine(t, wq(t, "", "work", "q", "--concurrency", "0", "--", "true"), 2, "concurrency")
	oneLine(t, wq(t, "", "enqueue", "a.b", "x"), 1, `queue name "a.b"`)
	oneLine(t, wq(t, "", "queue", "info", "missing"), 1, "queue missing not found")
	oneLine(t, wq(t, "", "job", "get", "missing", "x"), 1, "queue missing not found")
	oneLine(t, wq(t, "", "dlq", "ls", "missing"), 1, "queue missing not found")

	// An unreachable server fails at once, naming it.
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	r := wqEnv(t, []string{"NATS_URL=" + url}, "", "queue", "ls")
	oneLine(t, r, 1, "cannot connect", url)
	if r.took > 10*time.Second {
		t.Errorf("unreachable server took %s to report", r.took)
	}
	r = wq(t, "", "--server", url, "--wait", "500ms", "enqueue", "q", "x")
	oneLine(t, r, 1, "cannot connect", "500ms")

	// Bad credentials.
	srv, authURL, err := startNATS(t.TempDir(), "--user", "u", "--pass", "right", "-js", "-sd", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stopProcess(srv)
	oneLine(t, wq(t, "", "-s", authURL, "--user", "u", "--password", "wrong", "queue", "ls"), 1, "refused the credentials")
	ok(t, "", "-s", authURL, "--user", "u", "--password", "right", "queue", "ls")

	// A worker whose AckWait differs from the queue's workers is told so.
	w := start(t, "work", "ackq", "--ack-wait", "2s", "--", "true")
	waitFor(t, 10*time.Second, "worker started", func() bool { return strings.Contains(w.stderr(), "worker started") })
	w.signal(t, syscall.SIGTERM)
	w.wait(t, 15*time.Second)
	oneLine(t, wq(t, "", "work", "ackq", "--ack-wait", "5s", "--", "true"), 1, "--ack-wait 2s", "5s")
}

func TestServerKeepsDataAcrossRestart(t *testing.T) {
	t.Parallel()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "data")
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	for round := range 2 {
		s := start(t, "server", "--port", strconv.Itoa(port), "--data", dir)
		waitFor(t, 20*time.Second, "server listening", func() bool { return strings.Contains(s.stdout(), "listening on "+url) })
		if round == 0 {
			ok(t, "", "-s", url, "enqueue", "kept", "x", "--id", "k")
		} else {
			var qi queueInfo
			okJSON(t, &qi, "-s", url, "queue", "info", "kept", "--json")
			if qi.Jobs != 1 {
				t.Errorf("after restart the queue holds %d jobs, want 1", qi.Jobs)
			}
			oneLine(t, wq(t, "", "server", "--port", strconv.Itoa(port), "--data", t.TempDir()), 1, "cannot listen")
		}
		s.signal(t, syscall.SIGINT)
		if code := s.wait(t, 20*time.Second); code != 0 {
			t.Errorf("server exited %d; stderr: %s", code, s.stderr())
		}
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	r := wq(t, "", "demo")
	if r.code != 0 {
		t.Fatalf("workq demo exited %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// find returns the submatches of the first line matching re, or fails the test.
	find := func(re string) []string {
		t.Helper()
		m := regexp.MustCompile(`(?m)` + re).FindStringSubmatch(r.stdout)
		if m == nil {
			t.Errorf("demo output has no line matching %s", re)
		}
		return m
	}
	// The job the dying worker held went to a live worker, which committed it.
	if m := find(`w-kill dies while running (\S+) `); m != nil {
		k := regexp.QuoteMeta(m[1])
		find(k + ` redelivered to (w\d+|w-stall) \(attempt [2-9]\) after w-kill died holding it$`)
		find(`^\s+` + k + `: lost when w-kill died, committed by (w\d+|w-stall) on attempt [2-9]$`)
	}
	// The frozen worker's job went to another worker; its own late commit was refused.
	if m := find(`w-stall freezes for \S+ while running (\S+) `); m != nil {
		s := regexp.QuoteMeta(m[1])
		find(`w-stall: job ` + s + ` was reassigned — its late commit is refused`)
		find(`^\s+` + s + `: frozen on w-stall, committed by w\d+ on attempt [2-9]$`)
	}
	find(`\S+: job poison-1 moved to dead letters after 3 attempts \(.*poison job: cannot be processed\)`)
	find(`flaky-1 succeeded on attempt 3`)
	// The delayed job started after its time; the schedule fired each second, once.
	find(`⏰ reminder-1 started on \S+ \S+ after its time$`)
	firings := regexp.MustCompile(`(?m)⏲ (heartbeat/\d{8}T\d{6}Z): firing of heartbeat`).FindAllStringSubmatch(r.stdout, -1)
	seenFiring := map[string]bool{}
	for _, f := range firings {
		if seenFiring[f[1]] {
			t.Errorf("firing %s ran twice", f[1])
		}
		seenFiring[f[1]] = true
	}
	if len(firings) < 3 {
		t.Errorf("%d firings of the heartbeat schedule, want at least 3", len(firings))
	}
	timed := 0
	if m := find(`^timed\s+(\d+)\s+fired by the server`); m != nil {
		timed, _ = strconv.Atoi(m[1])
		if timed != 1+len(firings) {
			t.Errorf("timed %d, want 1 delayed job + %d firings", timed, len(firings))
		}
	}
	// The 3000 jobs less the dead one, the timed ones, the urgent one, the
	// workflow's three tasks and the sequences' six jobs.
	find(fmt.Sprintf(`^committed\s+%d\s+each exactly once\s*$`, 2999+timed+1+3+6))
	// The workflow's last task started once both parents committed, with their
	// results, and Wait returned its result.
	find(`⇉ invoice-7\.send started on \S+ once its parents committed, with their results invoice-7\.pdf and ch_42$`)
	find(`⇉ Wait returned invoice-7\.send's result "sent invoice-7\.pdf \+ ch_42", \S+ after its commit$`)
	find(`^workflow\s+3\s+tasks of invoice-7: send ran after render and charge committed\s*$`)
	// The two customers' webhooks ran, each key's in order (the demo checks it from
	// the records, and fails otherwise).
	find(`^sequences\s+6\s+jobs of 2 keys: each key one at a time, in enqueue order\s*$`)
	for _, key := range []string{"a", "b"} {
		find(`⇶ hook-customer-` + key + `-3 started on \S+$`)
	}
	// The urgent job enqueued behind the backlog started ahead of it; the cancelled
	// job never ran.
	if m := find(`^urgent\s+(\d+)\s+backlog jobs started between`); m != nil {
		if n, _ := strconv.Atoi(m[1]); n > 100 {
			t.Errorf("the urgent job started after %d backlog jobs", n)
		}
	}
	find(`^cancelled\s+1\s+oops-1, while it waited: never ran\s*$`)
	find(`^reassigned\s+[1-9]\d*\s+late commits refused\s*$`)
	find(`^dead\s+1\s+in dead letters \(1\)\s*$`)
	if t.Failed() {
		t.Logf("demo output:\n%s", r.stdout)
	}
	t.Logf("workq demo took %s", r.took)
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
