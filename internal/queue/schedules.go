package queue

import (
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/schedule"
)

// The server's message-schedule headers (server 2.12+). A schedule message carries
// the first four; the server writes the last two on each message it fires.
const (
	HeaderNatsSchedule         = "Nats-Schedule"           // "@at <RFC 3339>", "@every <duration>" or a 6-field cron
	HeaderNatsScheduleTarget   = "Nats-Schedule-Target"    // the subject the server fires onto
	HeaderNatsScheduleTimeZone = "Nats-Schedule-Time-Zone" // the IANA zone of a cron pattern
	HeaderNatsExpectedLastSubj = "Nats-Expected-Last-Subject-Sequence"
	HeaderNatsScheduler        = "Nats-Scheduler"     // on a fired message: the schedule's subject
	HeaderNatsScheduleNext     = "Nats-Schedule-Next" // on a fired message: the schedule's next time, or "purge" for a one-off
)

// Headers workq sets on schedule messages. The server copies a schedule's headers
// onto every message it fires, so the jobs carry them too.
const (
	// HeaderScheduledAt is when a delayed job is due (RFC 3339 with nanoseconds, UTC).
	HeaderScheduledAt = "Workq-Scheduled-At"
	// HeaderEnqueuedAt is when a delayed job was enqueued (RFC 3339 with
	// nanoseconds, UTC, the producer's clock): the copy the server fires is stored,
	// and so timestamped, when it is due.
	HeaderEnqueuedAt = "Workq-Enqueued-At"
	// HeaderSchedule names the periodic schedule that fired a job.
	HeaderSchedule = "Workq-Schedule"
	// HeaderScheduleSpec is the periodic schedule's spec as its owner wrote it; a
	// worker reads it to name a firing after its time.
	HeaderScheduleSpec = "Workq-Schedule-Spec"
	// HeaderSchedulePaused marks a paused periodic schedule: its message keeps the
	// schedule's definition without the Nats-Schedule header, so the server does not
	// fire it.
	HeaderSchedulePaused = "Workq-Schedule-Paused"
	// HeaderSchedulePriority is a periodic schedule's priority level when it is not
	// normal: its firings go to that level's subject (kept also while paused, when
	// the schedule has no target).
	HeaderSchedulePriority = "Workq-Schedule-Priority"
)

// Firing recognizes a job fired by one of this queue's periodic schedules and names
// the firing: the schedule's name and the time the firing stands for, from the
// schedule's spec and the next time the server wrote on the fired message (see
// schedule.Spec.Prev). ok is false for any other message, and for a fired message
// whose headers workq cannot read (then it is an ordinary job).
func (n Names) Firing(h nats.Header) (name string, at time.Time, ok bool) {
	name, ok = strings.CutPrefix(h.Get(HeaderNatsScheduler), n.PeriodicPrefix)
	if !ok || name == "" {
		return "", time.Time{}, false
	}
	spec, err := schedule.Parse(h.Get(HeaderScheduleSpec))
	if err != nil {
		return "", time.Time{}, false
	}
	next, err := time.Parse(time.RFC3339Nano, h.Get(HeaderNatsScheduleNext))
	if err != nil {
		return "", time.Time{}, false
	}
	at = spec.Prev(next)
	if at.IsZero() || CheckToken("job id", schedule.FiringID(name, at)) != nil {
		return "", time.Time{}, false
	}
	return name, at, true
}

// ScheduledAt is the due time a delayed job's message carries; zero if it has none.
func ScheduledAt(h nats.Header) time.Time {
	v := h.Get(HeaderScheduledAt)
	if v == "" { // most jobs: no parse error to allocate
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, v)
	return t
}

// EnqueuedAt is when the job of a message was enqueued: the time a delayed job
// carries (HeaderEnqueuedAt), else stored, the message's own timestamp.
func EnqueuedAt(h nats.Header, stored time.Time) time.Time {
	v := h.Get(HeaderEnqueuedAt)
	if v == "" {
		return stored
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t
	}
	return stored
}

// DropServerHeaders deletes from h, in place, the headers that are the server's
// transport and not the job's: atomic-batch headers (Nats-Batch-*), message-schedule
// headers (Nats-Schedule*, Nats-Scheduler, and the Nats-Rollup the server adds to a
// schedule) and publish expectations (Nats-Expected-*). A job's handler never sees them, and a copy of the job (a dead
// letter, a requeued job) must not carry them: the server would refuse the copy
// (a Nats-Scheduler header from a client) or take it for part of a batch.
func DropServerHeaders(h nats.Header) {
	for k := range h {
		if strings.HasPrefix(k, BatchHeaderPrefix) || strings.HasPrefix(k, "Nats-Schedule") || strings.HasPrefix(k, "Nats-Expected-") || k == "Nats-Rollup" {
			delete(h, k)
		}
	}
}

// MessageJobID is the id of the job a message on the jobs subjects carries: a
// periodic firing's id (Firing), else JobID's.
func (n Names) MessageJobID(subject string, h nats.Header, seq uint64) string {
	if name, at, ok := n.Firing(h); ok {
		return schedule.FiringID(name, at)
	}
	return n.JobID(subject, h.Get(HeaderID), seq)
}
