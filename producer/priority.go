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
// of its own (see the README's wire format). Another value fails the enqueue with
// ErrInvalidOption.
func Priority(p int) EnqueueOption { return func(j *Job) { j.Priority = p } }

// level is the level of a job's Priority field: 0 is normal.
func level(p int) int {
	if p == 0 {
		return PriorityNormal
	}
	return p
}

// jobSubjects are the subjects job id may wait on, to run now at any level (normal
// first: most jobs are) or delayed.
func (p *Producer) jobSubjects(id string) []string {
	return append(p.levelSubjects(id), p.names.DelayedSubject(id))
}

// levelSubjects are the subjects job id may wait on to run now, normal first.
func (p *Producer) levelSubjects(id string) []string {
	out := []string{p.names.JobSubject(id)}
	for _, l := range queue.Levels {
		if l != PriorityNormal {
			out = append(out, p.names.LevelJobSubject(l, id))
		}
	}
	return out
}
