package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// How workq behaves when it is killed or interrupted.

// A lock run killed with SIGKILL takes its command with it, and the command's own
// children: a command left running would hold no lock once the lease ran out, and
// run beside the next holder's.
func TestLockRunKilledKillsCommand(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("a command dies with workq only on Linux (parent-death signal)")
	}
	dir := t.TempDir()
	shFile, childFile := filepath.Join(dir, "sh"), filepath.Join(dir, "child")
	// The shell (the command) starts a child of its own and waits for it.
	first := start(t, "lock", "run", "--ttl", "1s", "Lkill", "--", "sh", "-c",
		`sleep 60 & echo $! > "`+childFile+`.tmp" && mv "`+childFile+`.tmp" "`+childFile+`"; `+
			`echo $$ > "`+shFile+`.tmp" && mv "`+shFile+`.tmp" "`+shFile+`"; wait`)
	var shPID, childPID int
	waitFor(t, 10*time.Second, "the command and its child running", func() bool {
		shPID, childPID = readPID(shFile), readPID(childFile)
		return shPID > 0 && childPID > 0
	})
	t.Cleanup(func() {
		for _, pid := range []int{shPID, childPID} {
			if !gone(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	if gone(shPID) || gone(childPID) {
		t.Fatalf("command (pid %d) or its child (pid %d) ended before workq was killed; stderr: %s", shPID, childPID, first.stderr())
	}
	first.signal(t, syscall.SIGKILL)
	waitFor(t, 5*time.Second, "workq killed", func() bool { return gone(first.cmd.Process.Pid) })
	waitFor(t, 10*time.Second, fmt.Sprintf("the command (pid %d) killed with workq", shPID), func() bool { return gone(shPID) })
	waitFor(t, 10*time.Second, fmt.Sprintf("the command's child (pid %d) killed with workq", childPID), func() bool { return gone(childPID) })
	first.wait(t, 5*time.Second) // the command shared workq's stdout: only now is it closed
	// The next run gets the lock once the dead holder's lease has run out.
	if r := wq(t, "", "lock", "run", "--timeout", "20s", "Lkill", "--", "true"); r.code != 0 {
		t.Errorf("lock run after the holder was killed: exit %d; stderr: %s", r.code, r.stderr)
	}
}

// A lock run whose lock is lost kills its command's whole process group: a child
// of the command that outlives the command (here one that ignores SIGTERM) must not
// run on without the lock.
func TestLockRunLostKillsGroup(t *testing.T) {
	t.Parallel()
	childFile := filepath.Join(t.TempDir(), "child")
	// The shell (the command) starts a child that ignores SIGTERM, and waits.
	first := start(t, "lock", "run", "--ttl", "1s", "--kill-grace", "30s", "Llost", "--", "sh", "-c",
		`sh -c 'trap "" TERM; while :; do sleep 0.1; done' >/dev/null 2>&1 & `+
			`echo $! > "`+childFile+`.tmp" && mv "`+childFile+`.tmp" "`+childFile+`"; wait`)
	var childPID int
	waitFor(t, 10*time.Second, "the command's child running", func() bool {
		childPID = readPID(childFile)
		return childPID > 0
	})
	t.Cleanup(func() {
		if !gone(childPID) {
			_ = syscall.Kill(childPID, syscall.SIGKILL)
		}
	})
	ok(t, "", "lock", "release", "Llost", "--force")
	if code := first.wait(t, 20*time.Second); code != 1 || !strings.Contains(first.stderr(), `lock "Llost" was lost`) {
		t.Errorf("lock run after its lock was released by force: exit %d, stderr %q; want 1, the lock was lost", code, first.stderr())
	}
	waitFor(t, 10*time.Second, fmt.Sprintf("the command's child (pid %d), which ignores SIGTERM, killed", childPID), func() bool { return gone(childPID) })
}

// enqueue gives up waiting for input on SIGINT/SIGTERM, says how far it got and
// fails; a --file it cannot open fails before the queue is created.
func TestEnqueueInterrupted(t *testing.T) {
	t.Parallel()
	const q = "enqint"
	for _, name := range []string{q, q + "-raw", "nofile"} {
		wq(t, "", "queue", "rm", name, "--yes") // left by an earlier run (-count)
	}
	queueJobs := func() int {
		r := wq(t, "", "queue", "info", q, "--json")
		var qi queueInfo
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &qi) != nil {
			return -1
		}
		return int(qi.Jobs)
	}

	// 1500 lines, then the input goes quiet with stdin still open (a slow or
	// endless producer): a full batch of 1000 is sent, and the other 500 once no
	// more input has come for a moment, not only at the end of the input.
	p, stdin := startPipe(t, "enqueue", q, "-q") // -q: an id per confirmed job
	var in strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&in, "job %d\n", i)
	}
	if _, err := io.WriteString(stdin, in.String()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "all 1500 jobs enqueued and confirmed while stdin is still open", func() bool {
		return strings.Count(p.stdout(), "\n") == 1500 && queueJobs() == 1500
	})
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 10*time.Second); code != 1 {
		t.Errorf("enqueue exited %d after SIGINT, want 1; stderr: %s", code, p.stderr())
	}
	for _, want := range []string{"interrupted", "1500 job(s) enqueued"} {
		if !strings.Contains(p.stderr(), want) {
			t.Errorf("stderr %q lacks %q", p.stderr(), want)
		}
	}
	if n := queueJobs(); n != 1500 {
		t.Errorf("queue holds %d jobs, want 1500", n)
	}

	// --raw reads all of stdin as one job: SIGTERM stops that too. Its queue is a
	// new one, whose creation shows that the reading is next (or the end of the
	// queue's provisioning, which an interruption also ends).
	p, _ = startPipe(t, "enqueue", q+"-raw", "--raw")
	waitFor(t, 10*time.Second, "the --raw enqueue's queue created", func() bool {
		return wq(t, "", "queue", "info", q+"-raw").code == 0
	})
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 10*time.Second); code != 1 || !strings.Contains(p.stderr(), "interrupted") || !strings.Contains(p.stderr(), "nothing enqueued") {
		t.Errorf("enqueue --raw after SIGTERM: exit %d, stderr %q; want 1, interrupted, nothing enqueued", code, p.stderr())
	}

	// A file that cannot be opened fails at once and creates nothing.
	for _, args := range [][]string{{"--file", "/does/not/exist"}, {"--raw", "-f", "/does/not/exist"}} {
		r := wq(t, "", append([]string{"enqueue", "nofile"}, args...)...)
		oneLine(t, r, 1, "/does/not/exist")
	}
	oneLine(t, wq(t, "", "queue", "info", "nofile"), 1, "queue nofile not found")
}

// An interrupted --wait says it was interrupted, not that the wait ran out.
func TestWaitInterrupted(t *testing.T) {
	t.Parallel()
	// No server: a listener that hangs up on every connection, so the test knows
	// when workq is in its retry loop.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dialled := make(chan struct{}, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case dialled <- struct{}{}:
			default:
			}
		}
	}()
	p := start(t, "--server", "nats://"+l.Addr().String(), "--wait", "30s", "queue", "ls")
	select {
	case <-dialled:
	case <-time.After(20 * time.Second):
		t.Fatalf("workq did not try to connect; stderr: %s", p.stderr())
	}
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 10*time.Second); code != 1 || !strings.Contains(p.stderr(), "interrupted while waiting for nats://") ||
		!strings.Contains(p.stderr(), "--wait 30s") || strings.Contains(p.stderr(), "within") {
		t.Errorf("interrupted --wait: exit %d, stderr %q; want 1 and that it was interrupted", code, p.stderr())
	}

	// A server without JetStream: workq waits for JetStream to answer.
	mport, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	srv, url, err := startNATS(t.TempDir(), "-m", strconv.Itoa(mport))
	if err != nil {
		t.Fatal(err)
	}
	defer stopProcess(srv)
	p = start(t, "--server", url, "--wait", "30s", "queue", "ls")
	waitFor(t, 20*time.Second, "workq connected", func() bool {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(mport) + "/connz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var cz struct {
			Connections []struct {
				Name string `json:"name"`
			} `json:"connections"`
		}
		if json.NewDecoder(resp.Body).Decode(&cz) != nil {
			return false
		}
		for _, c := range cz.Connections {
			if c.Name == "workq queue ls" {
				return true
			}
		}
		return false
	})
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 10*time.Second); code != 1 || !strings.Contains(p.stderr(), "interrupted while waiting for JetStream") {
		t.Errorf("interrupted wait for JetStream: exit %d, stderr %q; want 1 and that it was interrupted", code, p.stderr())
	}
}
