package producer

import "github.com/workq/workq/internal/queue"

// Priority levels (the Priority option). A worker with a free slot takes a waiting
// job of a higher level before any of a lower level, strictly: a lower level runs
// while no job of a higher one waits, also while higher jobs run.
const (
	PriorityLow    = queue.PriorityLow    // 1: after every other waiting job
	PriorityNormal = queue.PriorityNormal // 2: the default
	PriorityHigh   = queue.PriorityHigh   // 3: before normal and low jobs
	PriorityUrgent = queue.PriorityUrgent // 4: before every other waiting job
)

// Priority sets the job's priority level, PriorityLow to PriorityUrgent; default
// PriorityNormal. Each level other than normal has subjects and a workers' consumer
// of its own (see docs/wire-format.md). Another value fails the enqueue with
// ErrInvalidOption.
func Priority(p int) EnqueueOption { return func(j *Job) { j.Priority = p } }

// level is the level of a job's Priority field: 0 is normal.
func level(p int) int {
	if p == 0 {
		return PriorityNormal
	}
	return p
}
