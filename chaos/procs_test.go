//go:build chaos

package chaos

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/workq/workq/internal/testbin"
)

// The binaries under test, built by TestMain from this module and its go.mod deps.
var (
	binDir   string
	workqBin string
	natsBin  string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if os.Getenv(workerEnv) != "" {
		// Started by a test as one of its worker processes (workerproc_test.go).
		return workerProcess()
	}
	if runtime.GOOS != "linux" {
		fmt.Println("chaos: Linux only (process groups, SIGSTOP, the workq guard's pdeathsig); skipped")
		return 0
	}
	dir, err := os.MkdirTemp("", "workq-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	if workqBin, natsBin, err = testbin.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	killAll() // in case a test failed before its cleanups ran
	return code
}

// proc is a process the suite started, in a process group of its own.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

var (
	allMu    sync.Mutex
	allProcs = map[*proc]bool{}
)

// spawn starts path with args in its own process group, stdout and stderr appended to
// logPath. The test's end kills the group if it still runs.
func spawn(t testing.TB, name, logPath string, env []string, path string, args ...string) *proc {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	allMu.Lock()
	allProcs[p] = true
	allMu.Unlock()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process itself (not its group).
func (p *proc) signal(sig syscall.Signal) error {
	if p.exited() {
		return fmt.Errorf("%s already exited", p.name)
	}
	return p.cmd.Process.Signal(sig)
}

// crash SIGKILLs the process (only it: a workq worker's guard takes its commands'
// groups down, as it would after a real crash) and waits until it is reaped.
func (p *proc) crash(t testing.TB) {
	t.Helper()
	_ = p.signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s (pid %d) still there 10s after SIGKILL", p.name, p.pid())
	}
}

// stop asks the process to exit with SIGTERM and waits up to d; then SIGKILLs it.
// It reports whether the process exited by itself.
func (p *proc) stop(d time.Duration) bool {
	if p.exited() {
		return true
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process cannot handle SIGTERM
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		p.kill()
		return false
	}
}

// kill SIGKILLs the process's whole group and waits for the process.
func (p *proc) kill() {
	allMu.Lock()
	delete(allProcs, p)
	allMu.Unlock()
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

func killAll() {
	allMu.Lock()
	ps := make([]*proc, 0, len(allProcs))
	for p := range allProcs {
		ps = append(ps, p)
	}
	allMu.Unlock()
	for _, p := range ps {
		p.kill()
	}
}

// freePorts picks n distinct free loopback ports.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// waitUntil polls cond every 20ms until it holds, failing the test after d.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
