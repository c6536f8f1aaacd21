package queue

import (
	"strconv"
	"strings"

	"github.com/workq/workq/internal/wireid"
)

// Priority levels of jobs: a worker with a free slot takes a waiting job of a higher
// level before one of a lower level. Normal is the default, and its jobs keep the
// queue's jobs subjects; each other level has subjects and a workers' consumer of its
// own, because a consumer delivers in stream order.
const (
	PriorityLow    = 1
	PriorityNormal = 2
	PriorityHigh   = 3
	PriorityUrgent = 4
)

// Levels are the priority levels, highest first: the order a worker takes jobs in.
var Levels = []int{PriorityUrgent, PriorityHigh, PriorityNormal, PriorityLow}

// ValidPriority reports whether p is a priority level.
func ValidPriority(p int) bool { return p >= PriorityLow && p <= PriorityUrgent }

// PriorityPrefix (workq.<queue>.prio.) heads the subjects of the levels other than
// normal: workq.<queue>.prio.<level> for a plain publish, and
// workq.<queue>.prio.<level>.<id> for workq's own.
func (n Names) PriorityPrefix() string { return "workq." + n.Queue + ".prio." }

// PrioritySubjects are the stream's subjects of the levels other than normal.
func (n Names) PrioritySubjects() []string { return []string{n.PriorityPrefix() + ">"} }

// LevelSubject is the plain subject of level p: a publish there is a job of level p.
func (n Names) LevelSubject(p int) string {
	if p == PriorityNormal {
		return n.JobsSubject
	}
	return n.PriorityPrefix() + strconv.Itoa(p)
}

// LevelJobSubject is the subject workq publishes job id of level p to.
func (n Names) LevelJobSubject(p int, id string) string {
	if p == PriorityNormal {
		return n.JobSubject(id)
	}
	return n.LevelSubject(p) + "." + wireid.Encode(id)
}

// LevelFilter is the filter of level p's workers' consumer: its plain subject and
// every per-job subject.
func (n Names) LevelFilter(p int) []string {
	if p == PriorityNormal {
		return n.JobsFilter()
	}
	return []string{n.LevelSubject(p), n.LevelSubject(p) + ".>"}
}

// LevelConsumer is the durable consumer of level p: ConsumerName for normal,
// ConsumerName-p<level> for the others.
func (n Names) LevelConsumer(p int) string {
	if p == PriorityNormal {
		return n.Consumer
	}
	return n.Consumer + "-p" + strconv.Itoa(p)
}

// JobSubjects are the subjects job id may wait on, in the order of its life: delayed,
// then to run now at any level (normal first: most jobs are). The server stores a
// fired job before it removes its schedule, so reads in this order see a job that
// fires between two of them at its later stage, never at neither.
func (n Names) JobSubjects(id string) []string {
	return append([]string{n.DelayedSubject(id)}, n.LevelJobSubjects(id)...)
}

// LevelJobSubjects are the subjects job id may wait on to run now, normal first.
func (n Names) LevelJobSubjects(id string) []string {
	out := []string{n.JobSubject(id)}
	for _, l := range Levels {
		if l != PriorityNormal {
			out = append(out, n.LevelJobSubject(l, id))
		}
	}
	return out
}

// AllJobsFilter is every job subject of every level.
func (n Names) AllJobsFilter() []string {
	return append(n.JobsFilter(), n.PrioritySubjects()...)
}

// JobLevel parses a job message's subject: its level, and the id token it carries
// ("" for a plain publish; wireid.Decode gives the id). ok is false for a subject
// that is no job's.
func (n Names) JobLevel(subject string) (level int, id string, ok bool) {
	if subject == n.JobsSubject {
		return PriorityNormal, "", true
	}
	if id, found := strings.CutPrefix(subject, n.JobsPrefix); found {
		return PriorityNormal, id, true
	}
	rest, found := strings.CutPrefix(subject, n.PriorityPrefix())
	if !found || rest == "" {
		return 0, "", false
	}
	l, id, _ := strings.Cut(rest, ".")
	p, err := strconv.Atoi(l)
	if err != nil || !ValidPriority(p) || p == PriorityNormal || strconv.Itoa(p) != l {
		return 0, "", false
	}
	return p, id, true
}

// IsJobSubject reports whether subject is a job's, of any level.
func (n Names) IsJobSubject(subject string) bool {
	_, _, ok := n.JobLevel(subject)
	return ok
}
