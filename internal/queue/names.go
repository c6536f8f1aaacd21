// Package queue names and provisions the JetStream objects behind a workq queue and
// defines the wire format shared by producers and workers: subjects, headers, job ids.
package queue

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/workq/workq/internal/naming"
	"github.com/workq/workq/internal/wireid"
)

// Names are the JetStream objects of one queue.
type Names struct {
	Queue       string // the queue's name, e.g. "emails"
	Stream      string // WORKQ_<queue>: the jobs, WorkQueue retention
	JobsSubject string // workq.<queue>.jobs: where a plain publish is a job
	JobsPrefix  string // workq.<queue>.jobs. : workq publishes each job under prefix+id
	DeadStream  string // WORKQ_<queue>_DEAD: dead letters, Limits retention
	DeadSubject string // workq.<queue>.dead
	Bucket      string // WORKQ_<queue>_JOBS: job records, key = job id
	Consumer    string // the durable pull consumer every worker shares
	// DelayedPrefix (workq.<queue>.delayed.) + job id is the subject of a job
	// enqueued to start later: a message schedule that the server fires once, at the
	// job's time, onto the job's subject. Outside the workers' filter.
	DelayedPrefix string
	// PeriodicPrefix (workq.<queue>.periodic.) + name is the subject of a periodic
	// schedule: a message schedule that the server fires onto JobsSubject at every
	// time of the schedule. Outside the workers' filter.
	PeriodicPrefix string
	// UniqueBucket (WORKQ_<queue>_UNIQUE) holds the reservations of unique keys:
	// key = unique key, value = a Reservation. Created when first needed.
	UniqueBucket string
}

// ConsumerName is the durable consumer that every worker of a queue pulls from.
const ConsumerName = "workers"

// NamesFor checks the queue name and derives its objects' names.
func NamesFor(q string) (Names, error) {
	if err := naming.Check("queue", q); err != nil {
		return Names{}, err
	}
	return Names{
		Queue:       q,
		Stream:      "WORKQ_" + q,
		JobsSubject: "workq." + q + ".jobs",
		JobsPrefix:  "workq." + q + ".jobs.",
		DeadStream:  "WORKQ_" + q + "_DEAD",
		DeadSubject: "workq." + q + ".dead",
		Bucket:      "WORKQ_" + q + "_JOBS",
		Consumer:    ConsumerName,

		DelayedPrefix:  "workq." + q + ".delayed.",
		PeriodicPrefix: "workq." + q + ".periodic.",
		UniqueBucket:   "WORKQ_" + q + "_UNIQUE",
	}, nil
}

// JobSubject is the subject workq publishes job id to. Putting the id in the subject
// lets Status find a job that is still queued with one per-subject lookup.
func (n Names) JobSubject(id string) string { return n.JobsPrefix + wireid.Encode(id) }

// JobsFilter is the consumer's filter: the plain jobs subject and every per-job subject.
func (n Names) JobsFilter() []string { return []string{n.JobsSubject, n.JobsPrefix + ">"} }

// DelayedSubject is the subject of job id while it waits for its time.
func (n Names) DelayedSubject(id string) string { return n.DelayedPrefix + wireid.Encode(id) }

// PeriodicSubject is the subject of the periodic schedule name.
func (n Names) PeriodicSubject(name string) string { return n.PeriodicPrefix + name }

// ScheduleSubjects are the subjects of the stream's message schedules: delayed jobs
// and periodic schedules.
func (n Names) ScheduleSubjects() []string {
	return []string{n.DelayedPrefix + ">", n.PeriodicPrefix + ">"}
}

// MaxIDLen bounds job ids and unique keys, in bytes as their users give them.
const MaxIDLen = wireid.MaxLen

// CheckID checks a job id: 1 to MaxIDLen bytes of UTF-8 without control characters.
// Subjects, KV keys and message-id headers carry its token (internal/wireid), which
// is the id itself when it is made of [A-Za-z0-9_=/.-] only.
func CheckID(id string) error {
	if err := wireid.Check("job id", id); err != nil {
		return fmt.Errorf("%w: %w", naming.ErrInvalid, err)
	}
	return nil
}

// CheckToken checks s, a name that is both a KV key and a subject token as it is (a
// periodic schedule's): 1 to MaxIDLen characters of [A-Za-z0-9_=/.-], not starting
// or ending with '.', and no ".."; what names it in the error.
func CheckToken(what, s string) error {
	if s == "" {
		return fmt.Errorf("%w: %s is empty", naming.ErrInvalid, what)
	}
	if len(s) > MaxIDLen {
		return fmt.Errorf("%w: %s %.20q… is longer than %d characters", naming.ErrInvalid, what, s, MaxIDLen)
	}
	if s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return fmt.Errorf("%w: %s %q: '.' may not start or end it or stand twice in a row", naming.ErrInvalid, what, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || c == '=' || c == '/' || c == '.'
		if !ok {
			return fmt.Errorf("%w: %s %q has %q at offset %d; only letters, digits and _-=/. are allowed in %ss",
				naming.ErrInvalid, what, s, rune(c), i, what)
		}
	}
	return nil
}

// JobID is a job message's id: the id whose token (internal/wireid) is its
// Nats-Msg-Id, else the subject's suffix after workq.<queue>.jobs. (or a priority
// level's prefix), else "seq-<stream sequence>" for a plain publish without one.
// (The consumer derives the same id; it is here for readers outside it.)
func (n Names) JobID(subject, msgID string, seq uint64) string {
	if id, ok := wireid.Decode(msgID); ok {
		return id
	}
	if _, tok, ok := n.JobLevel(subject); ok {
		if id, ok := wireid.Decode(tok); ok {
			return id
		}
	}
	return "seq-" + strconv.FormatUint(seq, 10)
}
