//go:build chaos

package chaos

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// jobScript is the command `workq work` runs for each job. It records the run first
// (one printf, one write(2) to a file opened with O_APPEND: lines of concurrent runs do
// not interleave), then behaves as its payload says:
//
//	ok      sleeps $CHAOS_SLEEP and succeeds
//	slow    sleeps 1s and succeeds (so that kills and stalls catch jobs mid-run)
//	flaky   fails its first attempt, then succeeds
//	poison  fails for good (exit 100): the job goes to dead letters
//
// A success prints "r <id> <token>": the committed result names the run's fencing
// token, so the check can tell which run's output was committed.
const jobScript = `read -r p
printf '%s %s %s %s\n' "$WORKQ_JOB_ID" "$WORKQ_ATTEMPT" "$WORKQ_WORKER" "$WORKQ_FENCING_TOKEN" >> "$CHAOS_RUNLOG"
case "$p" in
poison) exit 100 ;;
flaky) [ "$WORKQ_ATTEMPT" -ge 2 ] || exit 3 ;;
slow) sleep 1 ;;
*) sleep "$CHAOS_SLEEP" ;;
esac
printf 'r %s %s\n' "$WORKQ_JOB_ID" "$WORKQ_FENCING_TOKEN"
`

// workerPool runs worker processes in numbered slots: `workq work` running jobScript,
// or, with program set, another program (workerproc_test.go). A slot's process can be
// crashed and replaced by a new one with a new name.
type workerPool struct {
	t           testing.TB
	dir         string
	queue       string
	url         string
	ackWait     time.Duration
	concurrency int
	sleep       string // seconds, for sleep(1)
	// program, when set, is the worker's command line and extra environment in place
	// of `workq work`; it must log each run as jobScript does, to w.runLog.
	program func(wp *workerPool, w *worker) (env []string, path string, args []string)
	// binary, when set, is the workq binary the worker launched into slot as the
	// gen-th launch of the pool runs (a rolling deploy mixes two builds); else workqBin.
	binary func(slot, gen int) string

	mu    sync.Mutex
	slots []*worker
	all   []*worker
	gen   int
}

type worker struct {
	name   string
	slot   int
	p      *proc
	runLog string // the runs its commands started
	log    string // workq's stderr: "worker started", "job <id> was reassigned", …
}

func (wp *workerPool) start(n int) {
	for i := 0; i < n; i++ {
		wp.slots = append(wp.slots, nil)
		wp.launch(i)
	}
}

func (wp *workerPool) launch(slot int) *worker {
	wp.mu.Lock()
	wp.gen++
	gen := wp.gen
	wp.mu.Unlock()
	w := &worker{name: fmt.Sprintf("w%d-%d", slot+1, gen), slot: slot}
	w.runLog = filepath.Join(wp.dir, "runs-"+w.name+".log")
	w.log = filepath.Join(wp.dir, "workq-"+w.name+".log")
	env := []string{"CHAOS_RUNLOG=" + w.runLog, "CHAOS_SLEEP=" + wp.sleep}
	path := workqBin
	if wp.binary != nil {
		path = wp.binary(slot, gen)
	}
	args := []string{"work", wp.queue, "--server", wp.url, "--wait", "60s", "--name", w.name,
		"--concurrency", strconv.Itoa(wp.concurrency), "--ack-wait", wp.ackWait.String(),
		"--backoff", "200ms", "--backoff-max", "1s", "--max-attempts", "10",
		"--drain-timeout", "10s", "--kill-grace", "1s",
		"--group-commit", "on", // the servers fsync every write: the durable deployment group commit is for
		"--", "sh", "-c", jobScript}
	if wp.program != nil {
		var more []string
		more, path, args = wp.program(wp, w)
		env = append(env, more...)
	}
	w.p = spawn(wp.t, w.name, w.log, env, path, args...)
	wp.mu.Lock()
	wp.slots[slot] = w
	wp.all = append(wp.all, w)
	wp.mu.Unlock()
	return w
}

// replace SIGKILLs the worker in slot and starts a new one there.
func (wp *workerPool) replace(slot int) (killed, started *worker) {
	killed = wp.slots[slot]
	killed.p.crash(wp.t)
	return killed, wp.launch(slot)
}

// stopAll drains every live worker with SIGTERM.
func (wp *workerPool) stopAll(d time.Duration) {
	var wg sync.WaitGroup
	for _, w := range wp.slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !w.p.stop(d) {
				wp.t.Errorf("worker %s did not drain within %s after SIGTERM", w.name, d)
			}
		}()
	}
	wg.Wait()
}

// run is one start of the job command, from a worker's run log: a line "job attempt
// worker token", and, from a program that knows it, the start's wall-clock time in
// Unix nanoseconds as a fifth field.
type run struct {
	job     string
	attempt int
	worker  string
	token   uint64
	at      time.Time // zero when the line has no time
}

// runs reads every worker's run log.
func (wp *workerPool) runs() []run {
	var rs []run
	for _, w := range wp.all {
		f, err := os.Open(w.runLog)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			wp.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) != 4 && len(fs) != 5 {
				wp.t.Errorf("%s: malformed run line %q", w.runLog, sc.Text())
				continue
			}
			a, _ := strconv.Atoi(fs[1])
			tok, _ := strconv.ParseUint(fs[3], 10, 64)
			r := run{job: fs[0], attempt: a, worker: fs[2], token: tok}
			if len(fs) == 5 {
				ns, _ := strconv.ParseInt(fs[4], 10, 64)
				r.at = time.Unix(0, ns)
			}
			rs = append(rs, r)
		}
		f.Close()
	}
	return rs
}

// logLines counts, over every worker's log, the lines that contain s.
func (wp *workerPool) logLines(s string) int {
	n := 0
	for _, w := range wp.all {
		b, err := os.ReadFile(w.log)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, s) {
				n++
			}
		}
	}
	return n
}
