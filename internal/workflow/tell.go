package workflow

import (
	"slices"
	"strings"
	"time"

	"github.com/workq/workq/internal/record"
)

// Told is what a waiting task learns in one write: parents that ended, each with
// whether it failed (ended dead or cancelled).
type Told map[string]bool

// Tell decides a waiting task's record after the parents in told ended: each leaves
// waiting_for, a failed one joins failed_parents. When none is left to wait for, the
// task is released (queued) or, when a parent failed and the task does not run if
// one did, cancelled — or, for a sequence's job on a key that halts when a job dies,
// halted (it stays waiting, for an operator's resume). changed is false when there is nothing to write: the task
// does not wait (released, cancelled or running already), or every parent told was
// told before. Telling the same parent twice therefore changes nothing, which is
// what makes a release exactly once: only the write that empties waiting_for
// releases.
func Tell(task *record.Record, told Told, now time.Time) (next record.Record, changed bool) {
	if task.State != record.Waiting {
		return *task, false
	}
	next = *task
	next.WaitingFor = slices.DeleteFunc(slices.Clone(task.WaitingFor), func(p string) bool {
		failed, ok := told[p]
		if ok && failed && !slices.Contains(next.FailedParents, p) {
			next.FailedParents = append(slices.Clone(next.FailedParents), p)
		}
		return ok
	})
	if len(next.WaitingFor) == len(task.WaitingFor) {
		return *task, false
	}
	if len(next.WaitingFor) > 0 {
		return next, true
	}
	next.WaitingFor = nil
	if len(next.FailedParents) > 0 && !next.RunIfFailed && next.HaltDead {
		// A sequence's job whose predecessor died, on a key that halts then: it
		// waits, for nothing but an operator's resume.
		next.Halted = true
		return next, true
	}
	if len(next.FailedParents) > 0 && !next.RunIfFailed {
		next.State, next.FinishedAt, next.Message = record.Cancelled, now, nil
		next.LastError = "cancelled: its parent task " + strings.Join(next.FailedParents, ", ") + " did not succeed"
		if len(next.FailedParents) > 1 {
			next.LastError = "cancelled: its parent tasks " + strings.Join(next.FailedParents, ", ") + " did not succeed"
		}
		return next, true
	}
	next.State = record.Queued
	return next, true
}
