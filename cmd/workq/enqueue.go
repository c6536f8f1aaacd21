package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/workq/workq/producer"
)

// enqueueFlags is `workq enqueue`: the queue, the payload argument if there is
// one, and the flags.
type enqueueFlags struct {
	queue       string
	payload     string
	hasPayload  bool // a payload argument was given: one job, no input read
	file        string
	raw, ndjson bool
	id, kind    string
	headers     []string
	maxAttempts int
	priority    priorityArg   // --priority, 0 for normal
	at          string        // --at, an RFC 3339 time
	in          time.Duration // --in
	unique      string        // --unique
	uniqueFor   time.Duration // --unique-for
	sequence    string        // --sequence
	haltOnDead  bool          // --halt-on-dead
	jsonOut     bool
	quiet       bool
	await       bool          // --await: wait for the job's end
	awaitFor    time.Duration // --await-timeout
	groupCommit groupCommitFlag

	header nats.Header // --header, parsed by validate; nil without one
	atTime time.Time   // --at, parsed by validate
}

func (a *app) enqueueCommand() *cobra.Command {
	f := &enqueueFlags{}
	cmd := &cobra.Command{
		Use:   "enqueue <queue> [payload]",
		Short: "Enqueue jobs: one from the argument, or one per line of --file or stdin",
		Long: `Enqueue jobs on a queue (created if missing).

With a payload argument, enqueues that one job. Otherwise reads --file (or stdin)
and enqueues one job per line, through the pipelined batch path, with a progress
bar on a terminal. --raw makes the whole input one job. With --ndjson each line is
a JSON object:

  {"payload": <string or any JSON>, "payload_base64": "...", "id": "...",
   "kind": "...", "headers": {"K": "v"}, "max_attempts": 3, "priority": "high",
   "at": "2026-11-24T02:00:00Z" | "after": "10m",
   "unique": "...", "unique_for": "1h", "sequence": "...", "halt_on_dead": true}

A string payload is enqueued as its text, any other JSON value as its JSON.
"at" or "after" delays a job: the server keeps it and fires it at its time.
"unique" (--unique) makes a job unique by that key: while a job with the key is
scheduled, queued, running or retrying (and for "unique_for" / --unique-for after
it ended), another one is a duplicate and nothing is stored.
"sequence" (--sequence) puts a job in the sequence of that key: the jobs of one
key run one at a time, in the order they were enqueued, across every worker; a
job waits for the one before it to end without taking a worker. With
"halt_on_dead" (--halt-on-dead) the key halts at the job when the one before it
ends dead, until 'workq sequence resume'; without, it runs all the same.
"priority" (--priority) is low, normal (the default), high or urgent (or the
level's number, 1 the lowest to 4): a worker takes waiting jobs of a higher
level first.
--kind, --header, --max-attempts, --priority, --at, --in, --unique, --unique-for,
--sequence and --halt-on-dead apply to every job; --id to a single job.
The exit status is non-zero if any job failed; the failed ones are named.
--await (one job) waits until the job has ended and shows its record, as
'workq job wait' does: the exit status is then non-zero unless the job ended done.`,
		Example: `  workq enqueue emails '{"to":"ann@example.com"}' --id welcome-ann
  workq enqueue reminders 'call Ann' --in 10m
  workq enqueue reports '{"day":"mon"}' --at 2026-11-24T02:00:00+01:00
  workq enqueue reports '{"day":"mon"}' --unique report-mon --unique-for 1h
  workq enqueue thumbnails '{"img":"a.png"}' --await --await-timeout 1m
  workq enqueue webhooks '{"event":"paid"}' --sequence customer-42
  seq 1 1000 | workq enqueue numbers
  workq enqueue emails --file jobs.ndjson --ndjson --json`,
		Args: rangeArgs(1, 2, "<queue> [payload]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue = args[0]
			if f.hasPayload = len(args) == 2; f.hasPayload {
				f.payload = args[1]
			}
			return a.execute(cmd.Context(), f)
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
	fl.Var(&f.priority, "priority", "priority level of these jobs: low, normal (the default), high or urgent (or 1 to 4, 1 the lowest)")
	fl.StringVar(&f.at, "at", "", "delay the jobs until this RFC 3339 time (e.g. 2026-11-24T02:00:00Z)")
	fl.DurationVar(&f.in, "in", 0, "delay the jobs by this duration (e.g. 90s, 10m)")
	fl.StringVar(&f.unique, "unique", "", "unique key: a duplicate while a job with this key is scheduled, queued, running or retrying")
	fl.DurationVar(&f.uniqueFor, "unique-for", 0, "keep the --unique key held this long after the job ended (whole seconds)")
	fl.StringVar(&f.sequence, "sequence", "", "sequence key: jobs with one key run one at a time, in enqueue order")
	fl.BoolVar(&f.haltOnDead, "halt-on-dead", false, "with --sequence: halt the key at these jobs when the job before ends dead")
	fl.BoolVar(&f.jsonOut, "json", false, "print each job's info as a JSON line")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print only the job ids")
	fl.BoolVar(&f.await, "await", false, "wait until the job has ended and show its record; fail unless it ended done (one job)")
	fl.DurationVar(&f.awaitFor, "await-timeout", 0, "with --await, wait at most this long (default: as long as it takes)")
	fl.Var(&f.groupCommit, "group-commit", groupCommitUsage)
	_ = cmd.MarkFlagFilename("file")
	return cmd
}

func (f *enqueueFlags) validate() error {
	var err error
	if f.header, err = parseHeaders(f.headers); err != nil {
		return err
	}
	f.atTime = time.Time{}
	if f.at != "" {
		t, err := time.Parse(time.RFC3339Nano, f.at)
		if err != nil {
			return fmt.Errorf("--at %q: want an RFC 3339 time such as 2026-11-24T02:00:00Z", f.at)
		}
		f.atTime = t
	}
	switch {
	case f.at != "" && f.in != 0:
		return errors.New("--at and --in exclude each other")
	case f.in < 0:
		return fmt.Errorf("--in %s: want a positive duration", f.in)
	case f.uniqueFor < 0:
		return fmt.Errorf("--unique-for %s: want a positive duration", f.uniqueFor)
	case f.uniqueFor > 0 && f.unique == "":
		return errors.New("--unique-for needs --unique")
	case f.haltOnDead && f.sequence == "":
		return errors.New("--halt-on-dead needs --sequence")
	case f.maxAttempts < 0:
		return fmt.Errorf("--max-attempts %d: want ≥ 1", f.maxAttempts)
	case f.hasPayload && (f.file != "" || f.raw || f.ndjson):
		return errors.New("give the payload as an argument or with --file/stdin, not both")
	case f.raw && f.ndjson:
		return errors.New("--raw and --ndjson exclude each other")
	case f.jsonOut && f.quiet:
		return errors.New("--json and --quiet exclude each other")
	case f.await && !f.hasPayload && !f.raw:
		return errors.New("--await waits for one job: give the payload as an argument, or --raw")
	case f.awaitFor < 0:
		return fmt.Errorf("--await-timeout %s: want a positive duration", f.awaitFor)
	case f.awaitFor > 0 && !f.await:
		return errors.New("--await-timeout needs --await")
	}
	return nil
}

// run enqueues the payload argument or the input as one job (--raw), or the
// input's lines as a job each.
func (f *enqueueFlags) run(ctx context.Context, a *app) error {
	// Open the input before touching the server: a --file that cannot be read must
	// not leave a new, empty queue behind.
	var in io.Reader
	if !f.hasPayload {
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
	octx, cancel := a.opCtx(ctx)
	p, err := producer.New(octx, c.js, f.queue, f.groupCommit.producer())
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return f.nothingEnqueued()
		}
		return err
	}
	if f.hasPayload || f.raw {
		return f.one(ctx, a, p, in)
	}
	return f.lines(ctx, a, p, in)
}

// one enqueues a single job: the payload argument, or all of in with --raw.
func (f *enqueueFlags) one(ctx context.Context, a *app, p *producer.Producer, in io.Reader) error {
	payload := []byte(f.payload)
	if !f.hasPayload {
		var err error
		payload, err = readAll(ctx, in)
		if ctx.Err() != nil {
			return f.nothingEnqueued()
		}
		if err != nil {
			return fmt.Errorf("read payload: %w", err)
		}
	}
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	info, err := p.Enqueue(octx, payload, producer.ID(f.id), producer.Kind(f.kind), headerOpts(f.header), producer.MaxAttempts(f.maxAttempts), producer.Priority(int(f.priority)), producer.At(f.due()),
		producer.Unique(f.unique), producer.UniqueFor(f.uniqueFor), sequenceOpts(f.sequence, f.haltOnDead))
	if err != nil {
		if ctx.Err() != nil {
			return exitCodeError{code: exitError, msg: fmt.Sprintf("queue %s: interrupted; the job may or may not have been enqueued", f.queue)}
		}
		return err
	}
	if f.await {
		// A duplicate's ID is the job already there (for a unique key, the job that
		// holds it): that is the job whose end answers this enqueue.
		wait := func(ctx context.Context, id string) (*producer.Record, error) { return p.Wait(ctx, id) }
		return awaitJob(ctx, a, f.queue, info.ID, f.awaitFor, f.jsonOut, wait)
	}
	return f.printEnqueued(a.stdout, info)
}

// parseHeaders parses --header k=v flags; nil without any.
func parseHeaders(kvs []string) (nats.Header, error) {
	var h nats.Header
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" || strings.ContainsAny(k, ": \r\n") {
			return nil, fmt.Errorf("--header %q: want key=value", kv)
		}
		if h == nil {
			h = nats.Header{}
		}
		h.Add(k, v)
	}
	return h, nil
}

// base is the job every input line starts from: the flags' id, kind, headers,
// attempt limit and due time.
func (f *enqueueFlags) base() producer.Job {
	return producer.Job{ID: f.id, Kind: f.kind, Header: f.header, MaxAttempts: f.maxAttempts, Priority: int(f.priority), At: f.due(), Unique: f.unique, UniqueFor: f.uniqueFor,
		Sequence: f.sequence, HaltOnDead: f.haltOnDead}
}

// due is when --at or --in delay the jobs to (--in counts from now); zero without
// either.
func (f *enqueueFlags) due() time.Time {
	if f.in > 0 {
		return time.Now().Add(f.in)
	}
	return f.atTime
}

func headerOpts(h nats.Header) producer.EnqueueOption {
	return func(j *producer.Job) { j.Header = h }
}

// sequenceOpts sets --sequence and --halt-on-dead.
func sequenceOpts(key string, halt bool) producer.EnqueueOption {
	return func(j *producer.Job) { j.Sequence, j.HaltOnDead = key, halt }
}

// printEnqueued reports the single job enqueued.
func (f *enqueueFlags) printEnqueued(w io.Writer, info producer.JobInfo) error {
	switch {
	case f.jsonOut:
		return json.NewEncoder(w).Encode(jobOutput{ID: info.ID, Sequence: info.Sequence, Duplicate: info.Duplicate, ScheduledAt: info.ScheduledAt, Waiting: info.Waiting})
	case f.quiet:
		fmt.Fprintln(w, info.ID)
	case info.Duplicate && f.unique != "":
		fmt.Fprintf(w, "duplicate: unique key %s is held by job %s (sequence %d); nothing stored\n", f.unique, info.ID, info.Sequence)
	case info.Duplicate && !info.ScheduledAt.IsZero():
		fmt.Fprintf(w, "duplicate %s: already enqueued as sequence %d (scheduled, or within the dedup window); nothing stored\n", info.ID, info.Sequence)
	case info.Duplicate:
		fmt.Fprintf(w, "duplicate %s: already enqueued as sequence %d within the dedup window; nothing stored\n", info.ID, info.Sequence)
	case !info.ScheduledAt.IsZero():
		fmt.Fprintf(w, "scheduled %s for %s (sequence %d)\n", info.ID, info.ScheduledAt.Local().Format(time.RFC3339), info.Sequence)
	case info.Waiting:
		fmt.Fprintf(w, "enqueued %s in sequence %s, waiting for the job before it\n", info.ID, f.sequence)
	default:
		fmt.Fprintf(w, "enqueued %s (sequence %d)\n", info.ID, info.Sequence)
	}
	return nil
}

// nothingEnqueued is the error of an enqueue interrupted before any job was sent.
func (f *enqueueFlags) nothingEnqueued() error {
	return exitCodeError{code: exitError, msg: fmt.Sprintf("queue %s: interrupted; nothing enqueued", f.queue)}
}
