package proc_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workq/workq/cmd/workq/internal/proc"
	"github.com/workq/workq/testenv"
)

// run runs `sh -c script` under Run with ends and returns how it ended.
func run(t *testing.T, script string, ends proc.Ends) proc.Exit {
	t.Helper()
	cmd, err := proc.Command([]string{"sh", "-c", script})
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	exit, err := proc.Run(cmd, ends)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return exit
}

// A command's end is told as a shell tells it, through the guard on Linux: the
// exit status, or 128 plus the signal that killed it.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script   string
		status   int
		signaled bool
		text     string
	}{
		{"true", 0, false, "command exited with status 0"},
		{"exit 3", 3, false, "command exited with status 3"},
		{"exit 100", 100, false, "command exited with status 100"},
		{"kill -TERM $$", 128 + int(syscall.SIGTERM), true, "command killed by signal terminated"},
		{"kill -KILL $$", 128 + int(syscall.SIGKILL), true, "command killed by signal killed"},
	} {
		t.Run(tc.script, func(t *testing.T) {
			t.Parallel()
			exit := run(t, tc.script, proc.Ends{})
			status, signaled, ok := exit.Status()
			if !ok || status != tc.status || signaled != tc.signaled || exit.Stopped {
				t.Errorf("Status() = %d, signaled %v, ok %v (stopped %v); want %d, %v, true (not stopped)", status, signaled, ok, exit.Stopped, tc.status, tc.signaled)
			}
			if got := exit.String(); got != tc.text {
				t.Errorf("String() = %q; want %q", got, tc.text)
			}
		})
	}
}

// Stop ends the command's whole process group: a child of the command that ignores
// SIGTERM is killed once the grace has passed, and Exit says the command was stopped.
func TestStopKillsGroup(t *testing.T) {
	t.Parallel()
	childFile := filepath.Join(t.TempDir(), "child")
	stop := make(chan struct{})
	closeWhen(stop, func() bool { return readPID(childFile) > 0 })
	// The shell (the command) starts a child that ignores SIGTERM, and waits for it
	// (both end by themselves after 30 s, should the test fail).
	exit := run(t, `sh -c 'trap "" TERM; for i in $(seq 300); do sleep 0.1; done' & echo $! > "`+childFile+`.tmp" && mv "`+childFile+`.tmp" "`+childFile+`"; wait`,
		proc.Ends{Stop: stop, Grace: 200 * time.Millisecond})
	child := readPID(childFile)
	if child <= 0 {
		t.Fatalf("the command ended (%s) before its child was running", exit)
	}
	t.Cleanup(func() {
		if !gone(child) {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
	})
	if !exit.Stopped {
		t.Errorf("the command ended (%s), not stopped; want stopped", exit)
	}
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("the command's child (pid %d) killed with its group", child), func() bool { return gone(child) })
}

// Term sends SIGTERM to the group and leaves the rest to the command: one that
// traps it ends as it chooses, not stopped.
func TestTermLeavesTheEndToTheCommand(t *testing.T) {
	t.Parallel()
	ready := filepath.Join(t.TempDir(), "ready")
	term := make(chan struct{})
	closeWhen(term, func() bool { _, err := os.Stat(ready); return err == nil })
	// The command ends by itself after 30 s (status 1), should the test fail.
	exit := run(t, `trap 'exit 7' TERM; touch "`+ready+`"; for i in $(seq 300); do sleep 0.1; done; exit 1`, proc.Ends{Term: term})
	if status, _, ok := exit.Status(); !ok || status != 7 || exit.Stopped {
		t.Errorf("the command ended (%s): status %d, ok %v, stopped %v; want 7, true, not stopped", exit, status, ok, exit.Stopped)
	}
}

// A command that cannot be found fails before anything runs, naming it.
func TestFind(t *testing.T) {
	t.Parallel()
	if err := proc.Find("sh"); err != nil {
		t.Errorf(`Find("sh") = %v; want nil`, err)
	}
	err := proc.Find("workq-no-such-command")
	if want := `command "workq-no-such-command": executable file not found in $PATH`; err == nil || err.Error() != want {
		t.Errorf("Find of a missing command = %v; want %q", err, want)
	}
	if _, err := proc.Command([]string{"workq-no-such-command"}); err == nil {
		t.Error("Command of a missing command: no error")
	}
}

// closeWhen closes ch once cond holds, or after 10 s: the test then finds what is
// missing.
func closeWhen(ch chan struct{}, cond func() bool) {
	go func() {
		defer close(ch)
		for deadline := time.Now().Add(10 * time.Second); !cond() && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}()
}

// readPID reads a process id from file, 0 if it is not there yet.
func readPID(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// gone says whether process pid has ended: it no longer exists, or it is a zombie
// that whoever inherited it has not reaped yet (on Linux, read from /proc).
func gone(pid int) bool {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// The state follows the command name, which is in parentheses.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
			return b[i+2] == 'Z'
		}
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}
