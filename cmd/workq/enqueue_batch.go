package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/workq/workq/producer"
)

// batchSender sends the jobs read from the input as pipelined batches, prints each
// job's outcome with --json or --quiet, and counts what became of them.
type batchSender struct {
	a       *app
	f       *enqueueFlags
	p       *producer.Producer
	bar     *progress
	chunk   []jobInput  // read, not sent yet
	ok      int         // jobs enqueued, duplicates included
	dups    int         // of which duplicates
	failed  []jobOutput // lines that were no job, and jobs the server refused: not enqueued
	unknown []jobOutput // jobs sent whose answer never came (interrupted): maybe enqueued
}

// jobOutput is what --json prints per job.
type jobOutput struct {
	ID        string `json:"id"`
	Sequence  uint64 `json:"sequence,omitempty"`
	Duplicate bool   `json:"duplicate"`
	// ScheduledAt is a delayed job's due time.
	ScheduledAt time.Time `json:"scheduled_at,omitzero"`
	// Waiting: a sequence's job waiting for the job of its key before it.
	Waiting bool   `json:"waiting,omitempty"`
	Line    int    `json:"line,omitempty"`
	Error   string `json:"error,omitempty"`
	// Unknown: the job was sent and no answer came (the enqueue was interrupted);
	// it may be enqueued. Without it, a line with an error was not enqueued.
	Unknown bool `json:"unknown,omitempty"`
}

// flush sends the chunk as one batch and empties it. It returns the batch's error
// if nothing was sent, else ctx's if ctx ended meanwhile.
func (s *batchSender) flush(ctx context.Context) error {
	if len(s.chunk) == 0 {
		return nil
	}
	jobs := make([]producer.Job, 0, len(s.chunk))
	idx := make([]int, 0, len(s.chunk))
	for i, in := range s.chunk {
		if in.err != nil {
			s.failed = append(s.failed, jobOutput{Line: in.line, Error: in.err.Error()})
			if s.f.jsonOut {
				_ = json.NewEncoder(s.a.stdout).Encode(jobOutput{Line: in.line, Error: in.err.Error()})
			}
			continue
		}
		jobs = append(jobs, in.job)
		idx = append(idx, i)
	}
	octx, cancel := s.a.opCtx(ctx)
	res, err := s.p.EnqueueBatch(octx, jobs)
	cancel()
	if err != nil && !errors.Is(err, producer.ErrBatch) && res == nil {
		return err
	}
	for k, r := range res {
		out := jobOutput{ID: r.ID, Sequence: r.Sequence, Duplicate: r.Duplicate, ScheduledAt: r.ScheduledAt, Waiting: r.Waiting, Line: s.chunk[idx[k]].line}
		switch {
		case r.Err != nil && r.Unknown:
			out.Error, out.Unknown = strip(r.Err).Error(), true
			s.unknown = append(s.unknown, out)
		case r.Err != nil:
			out.Error = strip(r.Err).Error()
			s.failed = append(s.failed, out)
		default:
			s.ok++
			if r.Duplicate {
				s.dups++
			}
		}
		switch {
		case s.f.jsonOut:
			_ = json.NewEncoder(s.a.stdout).Encode(out)
		case s.f.quiet && r.Err == nil:
			fmt.Fprintln(s.a.stdout, r.ID)
		}
	}
	s.bar.add(len(s.chunk))
	s.chunk = s.chunk[:0]
	return ctx.Err()
}

// stopped ends the command early: interrupted (SIGINT/SIGTERM), or by cause;
// sending says the chunk was being sent (some of it may be enqueued).
func (s *batchSender) stopped(ctx context.Context, cause error, sending bool) error {
	s.bar.clear()
	if ctx.Err() != nil {
		return s.interrupted(sending)
	}
	return s.failure(cause)
}

// interrupted reports an enqueue stopped by SIGINT or SIGTERM and fails the
// command: how many jobs were enqueued, how many were not (failed, or read and not
// sent), and how many were sent without an answer: those may be enqueued, and --json
// marks each "unknown" (sending such a line again under its id is safe within the
// duplicate window; a line without an id is a new job each time).
func (s *batchSender) interrupted(sending bool) error {
	msg := fmt.Sprintf("queue %s: interrupted; %d job(s) enqueued", s.f.queue, s.ok)
	switch unsent := len(s.chunk); {
	case unsent > 0 && sending:
		msg += fmt.Sprintf(", %d more were being sent (some may be enqueued)", unsent)
	case unsent > 0:
		msg += fmt.Sprintf(", %d read but not enqueued", unsent)
	}
	if len(s.failed) > 0 {
		msg += fmt.Sprintf(", %d not enqueued (failed)", len(s.failed))
	}
	if len(s.unknown) > 0 {
		msg += fmt.Sprintf(", %d sent without an answer (they may be enqueued: check them with 'workq job get')", len(s.unknown))
	}
	return exitCodeError{code: exitError, msg: msg}
}

// failure names the failed jobs in one line and fails the command; cause, if not
// nil, is what stopped the enqueue before the input's end.
func (s *batchSender) failure(cause error) error {
	var names []string
	for i, f := range s.failed {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(s.failed)-5))
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
	q := s.f.queue
	msg := fmt.Sprintf("queue %s: %d job(s) failed, %d enqueued: %s", q, len(s.failed), s.ok, strings.Join(names, "; "))
	if len(s.failed) == 0 {
		msg = fmt.Sprintf("queue %s: %d job(s) enqueued", q, s.ok)
	}
	if cause != nil {
		msg = fmt.Sprintf("queue %s: stopped after %d job(s): %v", q, s.ok, explain(cause))
		if len(s.failed) > 0 {
			msg += fmt.Sprintf("; %d failed: %s", len(s.failed), strings.Join(names, "; "))
		}
	}
	if len(s.unknown) > 0 {
		msg += fmt.Sprintf("; %d sent without an answer (they may be enqueued: check them with 'workq job get')", len(s.unknown))
	}
	return exitCodeError{code: exitError, msg: msg}
}

// summary prints the line that ends a successful enqueue of lines, with the rate.
func (s *batchSender) summary(took time.Duration) {
	rate := ""
	if took > 0 && s.ok > 1 {
		rate = fmt.Sprintf(", %.0f jobs/s", float64(s.ok)/took.Seconds())
	}
	fmt.Fprintf(s.a.stdout, "enqueued %d job(s) on %s in %s (%d duplicate(s)%s)\n", s.ok, s.f.queue, took.Round(time.Millisecond), s.dups, rate)
}
