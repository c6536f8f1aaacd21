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

// enqueueIdle is how long lines wait for more input before they are sent as a
// smaller batch: input that trickles in (tail -f, a slow producer) is enqueued as it
// comes, not when a thousand lines have gathered.
const enqueueIdle = 100 * time.Millisecond

type enqueueFlags struct {
	file        string
	raw, ndjson bool
	id, kind    string
	headers     []string
	maxAttempts int
	jsonOut     bool
	quiet       bool
	groupCommit groupCommitFlag
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
	fl.Var(&f.groupCommit, "group-commit", groupCommitUsage)
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

	// Open the input before touching the server: a --file that cannot be read must
	// not leave a new, empty queue behind.
	var in io.Reader
	if len(args) == 1 {
		r, closeIn, err := a.input(f.file)
		if err != nil {
			return err
		}
		defer closeIn()
		in = r
	}

	c, err := a.connect(ctx, "enqueue", false)
	if err != nil {
		return err
	}
	defer c.Close()
	nothing := exitCodeError{code: exitError, msg: fmt.Sprintf("queue %s: interrupted; nothing enqueued", q)}
	octx, cancel := a.opCtx(ctx)
	p, err := producer.New(octx, c.js, q, f.groupCommit.producer())
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nothing
		}
		return err
	}

	// One job from the argument or the whole input.
	if len(args) == 2 || f.raw {
		j := base
		if len(args) == 2 {
			j.Payload = []byte(args[1])
		} else {
			j.Payload, err = readAll(ctx, in)
			if ctx.Err() != nil {
				return nothing
			}
			if err != nil {
				return fmt.Errorf("read payload: %w", err)
			}
		}
		octx, cancel := a.opCtx(ctx)
		defer cancel()
		info, err := p.Enqueue(octx, j.Payload, producer.ID(j.ID), producer.Kind(j.Kind), headerOpts(j.Header), producer.MaxAttempts(j.MaxAttempts))
		if err != nil {
			if ctx.Err() != nil {
				return exitCodeError{code: exitError, msg: fmt.Sprintf("queue %s: interrupted; the job may or may not have been enqueued", q)}
			}
			return err
		}
		return a.printEnqueued(f, []producer.Result{{JobInfo: info}}, nil, 0)
	}

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
	// stopped ends the command early: interrupted (SIGINT/SIGTERM), or cause;
	// sending says the chunk was being sent (some of it may be enqueued).
	stopped := func(cause error, sending bool) error {
		bar.clear()
		if ctx.Err() != nil {
			return a.enqueueInterrupted(q, n, failed, len(chunk), sending)
		}
		return a.enqueueFailed(q, n, failed, cause)
	}
	stop := make(chan struct{})
	defer close(stop)
	batches := readLines(in, stop)
	for eof := false; !eof; {
		var idle <-chan time.Time
		if len(chunk) > 0 {
			idle = time.After(enqueueIdle)
		}
		var b lineBatch
		select {
		case <-ctx.Done():
			// Stop waiting for input that may never end (a terminal, an open pipe).
			return stopped(ctx.Err(), false)
		case <-idle:
			if err := flush(); err != nil {
				return stopped(err, true)
			}
			continue
		case b = <-batches:
		}
		for _, line := range b.lines {
			lastLine++
			line = bytes.TrimRight(line, "\r\n")
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			chunk = append(chunk, parseJobLine(line, lastLine, base, f.ndjson))
			if f.id != "" && n+len(failed)+len(chunk) > 1 {
				return usageError{errors.New("--id names a single job, but the input has more than one; give ids per line with --ndjson")}
			}
			if len(chunk) >= enqueueChunk {
				if err := flush(); err != nil {
					return stopped(err, true)
				}
			}
		}
		switch {
		case b.err == io.EOF:
			eof = true
		case b.err != nil:
			bar.clear()
			return fmt.Errorf("read input: %w", b.err)
		}
	}
	if err := flush(); err != nil {
		return stopped(err, true)
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

// lineBatch is lines read from the input, each with its newline, and the error
// that ended the input (io.EOF at its end) if it ended.
type lineBatch struct {
	lines [][]byte
	err   error
}

// readLines reads r on a goroutine of its own, so that the reader of the batches
// can give up on input that blocks (a terminal, a pipe nobody closes) when it is
// interrupted. A batch holds what was read without blocking, up to a few hundred
// lines; the last one carries the error that ended the input. The goroutine ends at
// the end of the input or, once the read under way returns, when stop is closed.
func readLines(r io.Reader, stop <-chan struct{}) <-chan lineBatch {
	ch := make(chan lineBatch, 4)
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		var b lineBatch
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				b.lines = append(b.lines, line)
			}
			b.err = err
			if err != nil || len(b.lines) >= 256 || br.Buffered() == 0 {
				select {
				case ch <- b:
				case <-stop:
					return
				}
				b = lineBatch{}
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// readAll reads r to its end, or until ctx ends.
func readAll(ctx context.Context, r io.Reader) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(r)
		ch <- result{b, err}
	}()
	select {
	case res := <-ch:
		return res.b, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// enqueueInterrupted reports an enqueue stopped by SIGINT or SIGTERM and fails
// the command: how many jobs made it, how many lines read were not sent (or were
// being sent, with no answer yet).
func (a *app) enqueueInterrupted(q string, ok int, failed []jobOutput, unsent int, sending bool) error {
	msg := fmt.Sprintf("queue %s: interrupted; %d job(s) enqueued", q, ok)
	switch {
	case unsent > 0 && sending:
		msg += fmt.Sprintf(", %d more were being sent (some may be enqueued)", unsent)
	case unsent > 0:
		msg += fmt.Sprintf(", %d read but not enqueued", unsent)
	}
	if len(failed) > 0 {
		msg += fmt.Sprintf(", %d failed", len(failed))
	}
	return exitCodeError{code: exitError, msg: msg}
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
	if st, err := fh.Stat(); err == nil && st.IsDir() {
		fh.Close()
		return nil, nil, fmt.Errorf("--file %s is a directory", file)
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
