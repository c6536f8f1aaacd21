package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/workq/workq/producer"
)

// enqueueChunk is how many jobs one pipelined batch carries: big enough to keep
// the pipeline full, small enough to show progress and bound memory on long input.
const enqueueChunk = 1000

// enqueueIdle is how long lines wait for more input before they are sent as a
// smaller batch: input that trickles in (tail -f, a slow producer) is enqueued as it
// comes, not when a thousand lines have gathered.
const enqueueIdle = 100 * time.Millisecond

// lines enqueues a job per non-empty line of in, in batches of up to enqueueChunk
// (sooner when the input pauses for enqueueIdle), with a progress bar on a
// terminal, and says how it went.
func (f *enqueueFlags) lines(ctx context.Context, a *app, p *producer.Producer, in io.Reader) error {
	total := int64(-1)
	if f.file != "" && f.file != "-" {
		total = countLines(f.file)
	}
	s := &batchSender{a: a, f: f, p: p, bar: newProgress(a.stderr, total, "enqueue "+f.queue)}
	start := time.Now()
	base := f.base()
	stop := make(chan struct{})
	defer close(stop)
	batches := readLines(in, stop)
	lastLine := 0
	for eof := false; !eof; {
		var idle <-chan time.Time
		if len(s.chunk) > 0 {
			idle = time.After(enqueueIdle)
		}
		var b lineBatch
		select {
		case <-ctx.Done():
			// Stop waiting for input that may never end (a terminal, an open pipe).
			return s.stopped(ctx, ctx.Err(), false)
		case <-idle:
			if err := s.flush(ctx); err != nil {
				return s.stopped(ctx, err, true)
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
			s.chunk = append(s.chunk, parseJobLine(line, lastLine, base, f.ndjson))
			if f.id != "" && s.ok+len(s.failed)+len(s.unknown)+len(s.chunk) > 1 {
				return usageError{errors.New("--id names a single job, but the input has more than one; give ids per line with --ndjson")}
			}
			if len(s.chunk) >= enqueueChunk {
				if err := s.flush(ctx); err != nil {
					return s.stopped(ctx, err, true)
				}
			}
		}
		switch {
		case b.err == io.EOF:
			eof = true
		case b.err != nil:
			s.bar.clear()
			return fmt.Errorf("read input: %w", b.err)
		}
	}
	if err := s.flush(ctx); err != nil {
		return s.stopped(ctx, err, true)
	}
	s.bar.finish()
	if len(s.failed) > 0 || len(s.unknown) > 0 {
		return s.failure(nil)
	}
	if !f.jsonOut && !f.quiet {
		s.summary(time.Since(start))
	}
	return nil
}
