package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/workq/workq/producer"
)

// enqueueChunk is how many jobs one pipelined batch carries: big enough to keep
// the pipeline full, small enough to show progress and bound memory on long input.
const enqueueChunk = 1000

type enqueueFlags struct {
	file        string
	raw, ndjson bool
	id, kind    string
	headers     []string
	maxAttempts int
	jsonOut     bool
	quiet       bool
}

func (a *app) enqueueCommand() *cobra.Command {
	var f enqueueFlags
	cmd := &cobra.Command{
		Use:   "enqueue <queue> [payload]",
		Short: "Enqueue jobs: one from the argument, or one per line of --file or stdin",
		Long: `Enqueue jobs on a queue (created if missing).

With a payload argument, enqueues that one job. Otherwise reads --file (or stdin)
and enqueues one job per line, through the pipelined batch path, with a progress
bar on a terminal. --raw makes the whole input one job. With --ndjson each line is
a JSON object:

  {"payload": <string or any JSON>, "payload_base64": "...", "id": "...",
   "kind": "...", "headers": {"K": "v"}, "max_attempts": 3}

A string payload is enqueued as its text, any other JSON value as its JSON.
--kind, --header and --max-attempts apply to every job; --id to a single job.
The exit status is non-zero if any job failed; the failed ones are named.`,
		Example: `  workq enqueue emails '{"to":"ann@example.com"}' --id welcome-ann
  seq 1 1000 | workq enqueue numbers
  workq enqueue emails --file jobs.ndjson --ndjson --json`,
		Args: rangeArgs(1, 2, "<queue> [payload]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.enqueue(cmd.Context(), args, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "read jobs from this file (- for stdin)")
	fl.BoolVar(&f.raw, "raw", false, "the whole input is one job's payload")
	fl.BoolVar(&f.ndjson, "ndjson", false, "each line is a JSON object with payload and optional id, kind, headers")
	fl.StringVar(&f.id, "id", "", "job id, the dedup key (one job only; default: generated)")
	fl.StringVar(&f.kind, "kind", "", "job kind")
	fl.StringArrayVarP(&f.headers, "header", "H", nil, "header k=v to add to every job (repeatable)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 0, "attempt limit for these jobs (default: the worker's)")
	fl.BoolVar(&f.jsonOut, "json", false, "print each job's info as a JSON line")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print only the job ids")
	_ = cmd.MarkFlagFilename("file")
	return cmd
}

// jobInput is one job read from the input, or why it could not be read.
type jobInput struct {
	line int
	job  producer.Job
	err  error
}

// ndjsonJob is a line of --ndjson input.
type ndjsonJob struct {
	ID            string          `json:"id"`
	Kind          string          `json:"kind"`
	Headers       map[string]any  `json:"headers"`
	Payload       json.RawMessage `json:"payload"`
	PayloadBase64 string          `json:"payload_base64"`
	MaxAttempts   int             `json:"max_attempts"`
}

// jobOutput is what --json prints per job.
type jobOutput struct {
	ID        string `json:"id"`
	Sequence  uint64 `json:"sequence,omitempty"`
	Duplicate bool   `json:"duplicate"`
	Line      int    `json:"line,omitempty"`
	Error     string `json:"error,omitempty"`
}

func (a *app) enqueue(ctx context.Context, args []string, f enqueueFlags) error {
	q := args[0]
	var header nats.Header
	for _, kv := range f.headers {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" || strings.ContainsAny(k, ": \r\n") {
			return usageError{fmt.Errorf("--header %q: want key=value", kv)}
		}
		if header == nil {
			header = nats.Header{}
		}
		header.Add(k, v)
	}
	if f.maxAttempts < 0 {
		return usageError{fmt.Errorf("--max-attempts %d: want ≥ 1", f.maxAttempts)}
	}
	if len(args) == 2 && (f.file != "" || f.raw || f.ndjson) {
		return usageError{errors.New("give the payload as an argument or with --file/stdin, not both")}
	}
	if f.raw && f.ndjson {
		return usageError{errors.New("--raw and --ndjson exclude each other")}
	}
	if f.jsonOut && f.quiet {
		return usageError{errors.New("--json and --quiet exclude each other")}
	}
	base := producer.Job{ID: f.id, Kind: f.kind, Header: header, MaxAttempts: f.maxAttempts}

	c, err := a.connect(ctx, "enqueue", false)
	if err != nil {
		return err
	}
	defer c.Close()
	octx, cancel := a.opCtx(ctx)
	p, err := producer.New(octx, c.js, q)
	cancel()
	if err != nil {
		return err
	}

	// One job from the argument or the whole input.
	if len(args) == 2 || f.raw {
		j := base
		if len(args) == 2 {
			j.Payload = []byte(args[1])
		} else {
			in, closeIn, err := a.input(f.file)
			if err != nil {
				return err
			}
			j.Payload, err = io.ReadAll(in)
			closeIn()
			if err != nil {
				return fmt.Errorf("read payload: %w", err)
			}
		}
		octx, cancel := a.opCtx(ctx)
		defer cancel()
		info, err := p.Enqueue(octx, j.Payload, producer.ID(j.ID), producer.Kind(j.Kind), headerOpts(j.Header), producer.MaxAttempts(j.MaxAttempts))
		if err != nil {
			return err
		}
		return a.printEnqueued(f, []producer.Result{{JobInfo: info}}, nil, 0)
	}

	in, closeIn, err := a.input(f.file)
	if err != nil {
		return err
	}
	defer closeIn()
	total := int64(-1)
	if f.file != "" && f.file != "-" {
		total = countLines(f.file)
	}
	bar := newProgress(a.stderr, total, "enqueue "+q)
	start := time.Now()
	var (
		chunk    []jobInput
		n, dups  int
		failed   []jobOutput
		lastLine int
	)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		jobs := make([]producer.Job, 0, len(chunk))
		idx := make([]int, 0, len(chunk))
		for i, in := range chunk {
			if in.err != nil {
				failed = append(failed, jobOutput{Line: in.line, Error: in.err.Error()})
				if f.jsonOut {
					_ = json.NewEncoder(a.stdout).Encode(jobOutput{Line: in.line, Error: in.err.Error()})
				}
				continue
			}
			jobs = append(jobs, in.job)
			idx = append(idx, i)
		}
		octx, cancel := a.opCtx(ctx)
		res, err := p.EnqueueBatch(octx, jobs)
		cancel()
		if err != nil && !errors.Is(err, producer.ErrBatch) && res == nil {
			return err
		}
		for k, r := range res {
			line := chunk[idx[k]].line
			out := jobOutput{ID: r.ID, Sequence: r.Sequence, Duplicate: r.Duplicate, Line: line}
			if r.Err != nil {
				out.Error = strip(r.Err).Error()
				failed = append(failed, out)
			} else {
				n++
				if r.Duplicate {
					dups++
				}
			}
			switch {
			case f.jsonOut:
				_ = json.NewEncoder(a.stdout).Encode(out)
			case f.quiet && r.Err == nil:
				fmt.Fprintln(a.stdout, r.ID)
			}
		}
		bar.add(len(chunk))
		chunk = chunk[:0]
		return ctx.Err()
	}
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, rerr := r.ReadBytes('\n')
		if len(line) > 0 {
			lastLine++
			line = bytes.TrimRight(line, "\r\n")
			if len(bytes.TrimSpace(line)) > 0 {
				ji := parseJobLine(line, lastLine, base, f.ndjson)
				chunk = append(chunk, ji)
				if f.id != "" && n+len(failed)+len(chunk) > 1 {
					return usageError{errors.New("--id names a single job, but the input has more than one; give ids per line with --ndjson")}
				}
				if len(chunk) >= enqueueChunk {
					if err := flush(); err != nil {
						bar.clear()
						return a.enqueueFailed(q, n, failed, err)
					}
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			bar.clear()
			return fmt.Errorf("read input: %w", rerr)
		}
	}
	if err := flush(); err != nil {
		bar.clear()
		return a.enqueueFailed(q, n, failed, err)
	}
	bar.finish()
	if len(failed) > 0 {
		return a.enqueueFailed(q, n, failed, nil)
	}
	if !f.jsonOut && !f.quiet {
		el := time.Since(start)
		rate := ""
		if el > 0 && n > 1 {
			rate = fmt.Sprintf(", %.0f jobs/s", float64(n)/el.Seconds())
		}
		fmt.Fprintf(a.stdout, "enqueued %d job(s) on %s in %s (%d duplicate(s)%s)\n", n, q, el.Round(time.Millisecond), dups, rate)
	}
	return nil
}

// enqueueFailed names the failed jobs in one line and fails the command.
func (a *app) enqueueFailed(q string, ok int, failed []jobOutput, cause error) error {
	var names []string
	for i, f := range failed {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(failed)-5))
			break
		}
		who := f.ID
		if f.Line > 0 {
			if who != "" {
				who = fmt.Sprintf("line %d (%s)", f.Line, f.ID)
			} else {
				who = fmt.Sprintf("line %d", f.Line)
			}
		}
		names = append(names, who+": "+oneLine(f.Error))
	}
	msg := fmt.Sprintf("queue %s: %d job(s) failed, %d enqueued: %s", q, len(failed), ok, strings.Join(names, "; "))
	if cause != nil {
		msg = fmt.Sprintf("queue %s: stopped after %d job(s): %v", q, ok, explain(cause))
		if len(failed) > 0 {
			msg += fmt.Sprintf("; %d failed: %s", len(failed), strings.Join(names, "; "))
		}
	}
	return exitCodeError{code: exitError, msg: msg}
}

func headerOpts(h nats.Header) producer.EnqueueOption {
	return func(j *producer.Job) { j.Header = h }
}

// input opens --file, or stdin for "" and "-".
func (a *app) input(file string) (io.Reader, func(), error) {
	if file == "" || file == "-" {
		return a.stdin, func() {}, nil
	}
	fh, err := os.Open(file)
	if err != nil {
		return nil, nil, fmt.Errorf("open --file: %w", err)
	}
	return fh, func() { fh.Close() }, nil
}

// countLines counts non-empty lines of a regular file for the progress bar; -1 if unknown.
func countLines(path string) int64 {
	fh, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer fh.Close()
	if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
		return -1
	}
	var n int64
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			n++
		}
	}
	if sc.Err() != nil {
		return -1
	}
	return n
}

// parseJobLine turns one input line into a job: the line is the payload, or with
// ndjson a JSON object describing the job.
func parseJobLine(line []byte, n int, base producer.Job, ndjson bool) jobInput {
	j := base
	if base.Header != nil {
		j.Header = nats.Header(http.Header(base.Header).Clone())
	}
	if !ndjson {
		j.Payload = append([]byte(nil), line...)
		return jobInput{line: n, job: j}
	}
	var nj ndjsonJob
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nj); err != nil {
		return jobInput{line: n, err: fmt.Errorf("not a job object: %v", err)}
	}
	switch {
	case nj.PayloadBase64 != "" && len(nj.Payload) > 0:
		return jobInput{line: n, err: errors.New("payload and payload_base64 exclude each other")}
	case nj.PayloadBase64 != "":
		b, err := base64.StdEncoding.DecodeString(nj.PayloadBase64)
		if err != nil {
			return jobInput{line: n, err: fmt.Errorf("payload_base64: %v", err)}
		}
		j.Payload = b
	case len(nj.Payload) > 0 && nj.Payload[0] == '"':
		var s string
		if err := json.Unmarshal(nj.Payload, &s); err != nil {
			return jobInput{line: n, err: fmt.Errorf("payload: %v", err)}
		}
		j.Payload = []byte(s)
	case len(nj.Payload) > 0 && string(nj.Payload) != "null":
		j.Payload = []byte(nj.Payload)
	}
	if nj.ID != "" {
		j.ID = nj.ID
	}
	if nj.Kind != "" {
		j.Kind = nj.Kind
	}
	if nj.MaxAttempts < 0 {
		return jobInput{line: n, err: fmt.Errorf("max_attempts %d: want ≥ 1", nj.MaxAttempts)}
	}
	if nj.MaxAttempts > 0 {
		j.MaxAttempts = nj.MaxAttempts
	}
	for k, v := range nj.Headers {
		if j.Header == nil {
			j.Header = nats.Header{}
		}
		switch x := v.(type) {
		case string:
			j.Header.Add(k, x)
		case []any:
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					return jobInput{line: n, err: fmt.Errorf("header %s: want strings", k)}
				}
				j.Header.Add(k, s)
			}
		default:
			return jobInput{line: n, err: fmt.Errorf("header %s: want a string or a list of strings", k)}
		}
	}
	return jobInput{line: n, job: j}
}

// printEnqueued reports single enqueues.
func (a *app) printEnqueued(f enqueueFlags, res []producer.Result, _ []jobOutput, _ int) error {
	for _, r := range res {
		switch {
		case f.jsonOut:
			if err := json.NewEncoder(a.stdout).Encode(jobOutput{ID: r.ID, Sequence: r.Sequence, Duplicate: r.Duplicate}); err != nil {
				return err
			}
		case f.quiet:
			fmt.Fprintln(a.stdout, r.ID)
		case r.Duplicate:
			fmt.Fprintf(a.stdout, "duplicate %s: already enqueued as sequence %d within the dedup window; nothing stored\n", r.ID, r.Sequence)
		default:
			fmt.Fprintf(a.stdout, "enqueued %s (sequence %d)\n", r.ID, r.Sequence)
		}
	}
	return nil
}
