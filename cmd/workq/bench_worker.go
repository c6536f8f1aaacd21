package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/workq/workq/cmd/workq/internal/bench"
)

// benchWorkerCommand is the worker side of `workq bench --scenario backlog`, run in a
// child process so that its peak RSS is the worker's alone (with the embedded
// server, the parent process also holds the server). It drains a queue and prints a
// bench.WorkerResult as JSON. Hidden: it is plumbing, not a user command.
func (a *app) benchWorkerCommand() *cobra.Command {
	var (
		q string
		n int
		s bench.WorkerSettings
	)
	cmd := &cobra.Command{
		Use:    "bench-worker",
		Short:  "Worker process of 'workq bench --scenario backlog'",
		Hidden: true,
		Args:   exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q == "" || n < 1 {
				return usageError{fmt.Errorf("bench-worker: want --queue and --jobs ≥ 1")}
			}
			c, err := a.connect(cmd.Context(), "bench-worker", false)
			if err != nil {
				return err
			}
			defer c.Close()
			r, err := bench.Drain(cmd.Context(), c.js, q, n, s)
			if err != nil {
				return err
			}
			return json.NewEncoder(a.stdout).Encode(r)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&q, "queue", "", "queue to drain")
	fl.IntVar(&n, "jobs", 0, "jobs it holds")
	fl.IntVar(&s.Concurrency, "concurrency", 32, "worker concurrency")
	fl.IntVar(&s.Prefetch, "prefetch", 0, "worker prefetch (0: concurrency)")
	fl.BoolVar(&s.Fenced, "fenced", false, "fenced processing")
	fl.IntVar(&s.Replicas, "replicas", 1, "the queue's replica count (checked)")
	return cmd
}

// childWorker runs the backlog's worker as `workq bench-worker` in a child process
// connected to url (on a cluster, every node's URL, comma separated) with this
// process's credentials (passed in the environment, not
// on the command line).
func (a *app) childWorker(url string, s bench.WorkerSettings) bench.BacklogWorker {
	return func(ctx context.Context, q string, n int) (bench.WorkerResult, error) {
		var r bench.WorkerResult
		exe, err := os.Executable()
		if err != nil {
			return r, fmt.Errorf("find the workq binary to run the worker: %w", err)
		}
		args := []string{"bench-worker", "--queue", q, "--jobs", strconv.Itoa(n),
			"--concurrency", strconv.Itoa(s.Concurrency), "--prefetch", strconv.Itoa(s.Prefetch),
			"--fenced=" + strconv.FormatBool(s.Fenced), "--replicas", strconv.Itoa(max(s.Replicas, 1))}
		f := a.conn
		for _, fl := range [][2]string{{"tls-cert", f.tlsCert}, {"tls-key", f.tlsKey}, {"tls-ca", f.tlsCA}} {
			if fl[1] != "" {
				args = append(args, "--"+fl[0], fl[1])
			}
		}
		cmd := exec.CommandContext(ctx, exe, args...)
		cmd.Env = append(os.Environ(), "NATS_URL="+url, "NATS_CREDS="+f.creds, "NATS_NKEY="+f.nkey,
			"NATS_USER="+f.user, "NATS_PASSWORD="+f.password, "NATS_TOKEN="+f.token)
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
