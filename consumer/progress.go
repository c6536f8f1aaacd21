package consumer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/workq/workq/internal/record"
)

// A running job's progress (Job.Progress) is written in its record with the claim's
// next write: at once when the last progress write is older than progressEvery,
// else with the next renewal (every heartbeat) or the commit, so a handler that
// reports in a tight loop costs at most one write a second.

// progressEvery is how often at most Job.Progress writes the record itself.
const progressEvery = time.Second

// maxProgressNote bounds a progress note, counted as recordError counts.
const maxProgressNote = 256

// ErrInvalidProgress is returned by Job.Progress for a fraction outside 0–1.
var ErrInvalidProgress = errors.New("progress outside 0 to 1")

// progressReport is a progress the run reported and has not written yet.
type progressReport struct {
	fraction float64
	note     string
	at       time.Time
}

// Progress records how much of the job is done, fraction from 0 to 1, and a note
// (cut to 256 bytes), in the job's record: Status, producer.Wait's Following, `workq
// job get` and the dashboard show it. Reports are coalesced: at most one write a
// second, the latest report winning; one not written yet is written with the next
// renewal of the claim or with the commit. It returns ErrUnfenced on an unfenced
// worker, ErrInvalidProgress for a fraction outside 0–1, and the claim's loss
// (ErrStale, ErrCancelled) when its write finds the job taken over or cancelled.
func (j *Job) Progress(ctx context.Context, fraction float64, note string) error {
	switch {
	case !j.fenced:
		return fmt.Errorf("job %s: %w", j.id, ErrUnfenced)
	case math.IsNaN(fraction) || fraction < 0 || fraction > 1:
		return fmt.Errorf("job %s: %w: %v", j.id, ErrInvalidProgress, fraction)
	}
	now := time.Now()
	j.mu.Lock()
	j.progress = &progressReport{fraction: fraction, note: cutText(note, maxProgressNote), at: now}
	due := now.Sub(j.progressAt) >= progressEvery
	if due {
		j.progressAt = now // the next reports within a second wait for a renewal or the commit
	}
	j.mu.Unlock()
	if !due {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, j.w.cfg.ackWait)
	defer cancel()
	err := j.w.writeClaim(ctx, j, func(*record.Record) {})
	if errors.Is(err, record.ErrConflict) {
		j.mu.Lock()
		cause := j.lostErr
		j.mu.Unlock()
		if cause == nil {
			cause = ErrStale
		}
		return fmt.Errorf("job %s: progress not written: %w", j.id, cause)
	}
	return err
}

// applyProgress writes the run's pending progress into next, a write over its claim.
// j.mu is held.
func (j *Job) applyProgress(next *record.Record) {
	if p := j.progress; p != nil {
		next.Progress, next.ProgressMsg, next.ProgressAt = p.fraction, p.note, p.at
	}
}
