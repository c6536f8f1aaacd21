package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"
)

// The backlog scenario measures the worker's peak RSS. With the embedded server the
// bench process also holds the server, so the worker runs in a child process of its
// own: this binary re-executed as its hidden WorkerCommand, which drains the queue
// (WorkerProcess) and prints a WorkerResult as JSON on its stdout.

// WorkerCommand is the name of the hidden subcommand that runs a WorkerProcess:
// `workq bench-worker`.
const WorkerCommand = "bench-worker"

// Login says how a child process connects to url as this process does: the
// command-line flags to pass it (such as TLS files) and the variables to add to its
// environment (the URL and credentials, which do not go on the command line, where
// other users can read them).
type Login func(url string) (args, env []string)

// childWorker runs the backlog's worker as WorkerCommand in a child process of this
// binary, connected to url (on a cluster, every node's URL, comma separated) as
// login says, with the settings s.
func childWorker(url string, login Login, s WorkerSettings) BacklogWorker {
	return func(ctx context.Context, q string, n int) (WorkerResult, error) {
		var r WorkerResult
		exe, err := os.Executable()
		if err != nil {
			return r, fmt.Errorf("find the workq binary to run the worker: %w", err)
		}
		args := []string{WorkerCommand, "--queue", q, "--jobs", strconv.Itoa(n),
			"--concurrency", strconv.Itoa(s.Concurrency), "--prefetch", strconv.Itoa(s.Prefetch),
			"--fenced=" + strconv.FormatBool(s.Fenced), "--replicas", strconv.Itoa(max(s.Replicas, 1))}
		largs, lenv := login(url)
		cmd := exec.CommandContext(ctx, exe, append(args, largs...)...)
		cmd.Env = append(os.Environ(), lenv...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return r, fmt.Errorf("worker process: %v: %s", err, strings.TrimSpace(errb.String()))
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			return r, fmt.Errorf("worker process said %q: %v", strings.TrimSpace(out.String()), err)
		}
		return r, nil
	}
}

// WorkerProcess is the child process's side: the queue to drain, its size and the
// worker's settings, as childWorker passes them on the command line.
type WorkerProcess struct {
	Queue    string
	Jobs     int
	Settings WorkerSettings
}

// Register defines the flags childWorker passes on fs, the hidden command's.
func (p *WorkerProcess) Register(fs *pflag.FlagSet) {
	fs.StringVar(&p.Queue, "queue", "", "queue to drain")
	fs.IntVar(&p.Jobs, "jobs", 0, "jobs it holds")
	fs.IntVar(&p.Settings.Concurrency, "concurrency", 32, "worker concurrency")
	fs.IntVar(&p.Settings.Prefetch, "prefetch", 0, "worker prefetch (0: concurrency)")
	fs.BoolVar(&p.Settings.Fenced, "fenced", false, "fenced processing")
	fs.IntVar(&p.Settings.Replicas, "replicas", 1, "the queue's replica count (checked)")
}

// Check says what is missing from the command line, before anything connects.
func (p *WorkerProcess) Check() error {
	if p.Queue == "" || p.Jobs < 1 {
		return errors.New(WorkerCommand + ": want --queue and --jobs ≥ 1")
	}
	return nil
}

// Run drains the queue over js (Drain) and writes its WorkerResult to w as JSON,
// for childWorker to read.
func (p *WorkerProcess) Run(ctx context.Context, js jetstream.JetStream, w io.Writer) error {
	r, err := Drain(ctx, js, p.Queue, p.Jobs, p.Settings)
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(r)
}
