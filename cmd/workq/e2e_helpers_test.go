package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/testbin"
)

// The end-to-end tests run the workq binary as a user would, against a nats-server
// process of their own (built from the module's dependency), not an embedded one.
var (
	workqBin  string
	natsBin   string
	serverURL string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if fuzzing() {
		return m.Run() // a fuzz target (run with -run '^$') needs no binaries or server
	}
	dir, err := os.MkdirTemp("", "workq-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if workqBin, natsBin, err = testbin.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv, url, err := startNATS(dir, "-js", "-sd", filepath.Join(dir, "js"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopProcess(srv)
	serverURL = url
	return m.Run()
}

// fuzzing reports whether the test binary runs a fuzz target: as the coordinator
// (-fuzz) or as one of its workers.
func fuzzing() bool {
	fz, worker := flag.Lookup("test.fuzz"), flag.Lookup("test.fuzzworker")
	return fz != nil && fz.Value.String() != "" || worker != nil && worker.Value.String() == "true"
}

// startNATS starts a nats-server process on a free port and waits until it accepts
// connections.
func startNATS(dir string, args ...string) (*exec.Cmd, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	return startNATSOn(port, args...)
}

// startNATSOn starts a nats-server process on port (a restart on the port of one
// stopped) and waits until it accepts connections.
func startNATSOn(port int, args ...string) (*exec.Cmd, string, error) {
	args = append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)
	cmd := exec.Command(natsBin, args...)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return cmd, "nats://" + addr, nil
		}
		if time.Now().After(deadline) {
			stopProcess(cmd)
			return nil, "", fmt.Errorf("nats-server on %s not up within 20s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stopProcess(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// result is a finished workq run.
type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// wq runs workq against the test server with stdin and waits up to 60s for it.
func wq(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return wqEnv(t, nil, stdin, args...)
}

func wqEnv(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, workqBin, args...)
	cmd.Env = append(append(os.Environ(), "NATS_URL="+serverURL), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("workq %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("workq %v did not finish within 60s; stderr: %s", args, r.stderr)
	}
	return r
}

// ok runs workq and fails the test unless it exits 0.
func ok(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := wq(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("workq %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// okJSON runs workq and decodes its stdout into v.
func okJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := ok(t, "", args...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("workq %s: stdout is not JSON (%v): %s", strings.Join(args, " "), err, out)
	}
}

// proc is a workq process running in the background.
type proc struct {
	cmd      *exec.Cmd
	mu       sync.Mutex
	out, err bytes.Buffer
	done     chan struct{}
	exitCode int
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// start runs workq in the background; the test's end kills it if still running.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := newProc(args)
	p.launch(t)
	return p
}

// startPipe is start with a pipe to workq's stdin, which the test writes and closes
// (the test's end closes it too).
func startPipe(t *testing.T, args ...string) (*proc, io.WriteCloser) {
	t.Helper()
	p := newProc(args)
	w, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.launch(t)
	t.Cleanup(func() { _ = w.Close() })
	return p, w
}

func newProc(args []string) *proc {
	p := &proc{cmd: exec.Command(workqBin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "NATS_URL="+serverURL)
	p.cmd.Stdout = lockedWriter{&p.mu, &p.out}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.err}
	return p
}

func (p *proc) launch(t *testing.T) {
	t.Helper()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.exitCode = 0
		if ee, ok := err.(*exec.ExitError); ok {
			p.exitCode = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// exited says whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err.String()
}

func (p *proc) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.exitCode
	case <-time.After(d):
		t.Fatalf("workq %v still running after %s; stderr: %s", p.cmd.Args[1:], d, p.stderr())
		return -1
	}
}

// stop sends SIGTERM, as an operator would, and wants a clean exit within 20s.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("workq %v exited %d after SIGTERM; stderr: %s", p.cmd.Args[1:], code, p.stderr())
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readPID reads a pid a command wrote to path; 0 if it is not there yet.
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return n
}

// gone says whether process pid has ended: it no longer exists, or it is a zombie
// that whoever inherited it has not reaped yet (Linux: it reads /proc).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return true
	}
	if err != nil {
		return false
	}
	// The state is the first field after the command name, which is in parentheses.
	rest := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(rest) > 0 && (rest[0] == "Z" || rest[0] == "X")
}

// jobRecord is the part of `workq job get --json` the tests read.
type jobRecord struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	State     string `json:"state"`
	Attempt   int    `json:"attempt"`
	Result    []byte `json:"result"`
	LastError string `json:"last_error"`
	Worker    *struct {
		Name string `json:"name"`
		PID  int    `json:"pid"`
	} `json:"worker"`
}

func getJob(t *testing.T, q, id string) jobRecord {
	t.Helper()
	var r jobRecord
	okJSON(t, &r, "job", "get", q, id, "--json")
	return r
}

// queueInfo is the part of `workq queue info --json` the tests read.
type queueInfo struct {
	Jobs            uint64 `json:"jobs"`
	Pending         uint64 `json:"pending"`
	AckPending      int    `json:"ack_pending"`
	Running         int    `json:"running"`
	Retrying        int    `json:"retrying"`
	RetryingPartial bool   `json:"retrying_partial"`
	Waiting         int    `json:"waiting"`
	Dead            uint64 `json:"dead"`
	AckWait         string `json:"ack_wait"`
	Paused          bool   `json:"paused"`
}

func getQueue(t *testing.T, q string) queueInfo {
	t.Helper()
	var qi queueInfo
	okJSON(t, &qi, "queue", "info", q, "--json")
	return qi
}

// oneLine checks that a failure said one line, naming what, with no stack trace.
func oneLine(t *testing.T, r result, code int, what ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d; stderr: %s", r.code, code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if !strings.HasPrefix(lines[0], "workq: ") || strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
		t.Errorf("stderr is not one clear line: %q", r.stderr)
	}
	if len(lines) > 2 || len(lines) == 2 && !strings.HasPrefix(lines[1], "Run '") {
		t.Errorf("stderr has %d lines: %q", len(lines), r.stderr)
	}
	for _, w := range what {
		if !strings.Contains(strings.ToLower(r.stderr), strings.ToLower(w)) {
			t.Errorf("stderr %q does not mention %q", r.stderr, w)
		}
	}
}

// jsClient connects a Go client to url, closed when the test ends, for what a test
// checks beside the CLI.
func jsClient(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
