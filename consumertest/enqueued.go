package consumertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/jobargs"
	"github.com/workq/workq/internal/queue"
)

// EnqueuedJob is a job in a queue's stream: waiting to run, or running (a job leaves
// the stream when a worker has settled it).
type EnqueuedJob struct {
	// ID is the job id (producer.ID, or the one generated).
	ID string
	// Kind is the job's kind, "" if it has none.
	Kind string
	// Payload is the job's data.
	Payload []byte
	// Header is the job message's headers, workq's own included.
	Header nats.Header
	// MaxAttempts is the job's own attempt limit (producer.MaxAttempts), 0 if it has
	// none.
	MaxAttempts int
	// Sequence is the job message's sequence in the queue's stream.
	Sequence uint64
	// EnqueuedAt is when the server stored the job.
	EnqueuedAt time.Time
	// ScheduledAt is when a delayed job (producer.At, producer.After) is due, or the
	// time a periodic schedule's firing stands for; zero for a job that runs at once.
	// A delayed job is listed while it waits, as well as once it has fired.
	ScheduledAt time.Time
}

// Match selects enqueued jobs: a job matches when it has every field that is set.
// The zero Match matches every job.
type Match struct {
	ID   string
	Kind string
}

// filter returns the jobs that match m, in order.
func (m Match) filter(jobs []EnqueuedJob) []EnqueuedJob {
	var found []EnqueuedJob
	for _, j := range jobs {
		if m.matches(j) {
			found = append(found, j)
		}
	}
	return found
}

func (m Match) matches(j EnqueuedJob) bool {
	return (m.ID == "" || m.ID == j.ID) && (m.Kind == "" || m.Kind == j.Kind)
}

func (m Match) String() string {
	var parts []string
	if m.ID != "" {
		parts = append(parts, "id "+m.ID)
	}
	if m.Kind != "" {
		parts = append(parts, "kind "+strconv.Quote(m.Kind))
	}
	if len(parts) == 0 {
		return "any job"
	}
	return strings.Join(parts, ", ")
}

// Enqueued returns the jobs in queue's stream, oldest first, read from the server as
// they are now: a job enqueued by a call that has returned is there. It fails the
// test if the queue does not exist (no producer or worker has opened it: a misspelt
// name, most likely) or cannot be read.
func Enqueued(t testing.TB, js jetstream.JetStream, queueName string) []EnqueuedJob {
	t.Helper()
	jobs, err := enqueued(t.Context(), js, queueName)
	if err != nil {
		t.Fatalf("consumertest: %v", err)
	}
	return jobs
}

// RequireEnqueued asserts that exactly one job in queue's stream matches m and
// returns it, for further checks. It fails the test, listing the queue's jobs, when
// none or several match. Like Enqueued it reads the stream once: call it after the
// code under test has returned from its enqueue.
func RequireEnqueued(t testing.TB, js jetstream.JetStream, queueName string, m Match) EnqueuedJob {
	t.Helper()
	jobs := Enqueued(t, js, queueName)
	found := m.filter(jobs)
	if len(found) != 1 {
		t.Fatalf("consumertest: queue %s: want one job matching %s, found %d; the queue holds %s", queueName, m, len(found), list(jobs))
	}
	return found[0]
}

// RequireNotEnqueued asserts that no job in queue's stream matches m, failing the
// test with the ones that do. It reads the stream once, as Enqueued does.
func RequireNotEnqueued(t testing.TB, js jetstream.JetStream, queueName string, m Match) {
	t.Helper()
	if found := m.filter(Enqueued(t, js, queueName)); len(found) > 0 {
		t.Fatalf("consumertest: queue %s: want no job matching %s, found %s", queueName, m, list(found))
	}
}

// RequireEnqueuedArgs is RequireEnqueued for a typed job: the one job of T's kind
// (consumer.JobArgs) that matches m, and its payload decoded from JSON into a T. m's
// Kind, if set, must be T's. It fails the test when T's kind cannot be read from the
// type (see consumer.RouteArgs) or the payload does not decode.
func RequireEnqueuedArgs[T consumer.JobArgs](t testing.TB, js jetstream.JetStream, queueName string, m Match) (T, EnqueuedJob) {
	t.Helper()
	var args T
	kind, err := jobargs.KindOf[T]()
	if err != nil {
		t.Fatalf("consumertest: %v", err)
	}
	if m.Kind != "" && m.Kind != kind {
		t.Fatalf("consumertest: Match of kind %q for %T, whose kind is %q", m.Kind, args, kind)
	}
	m.Kind = kind
	j := RequireEnqueued(t, js, queueName, m)
	if err := json.Unmarshal(j.Payload, &args); err != nil {
		t.Fatalf("consumertest: queue %s: job %s: payload %q is not a %T: %v", queueName, j.ID, j.Payload, args, err)
	}
	return args, j
}

// enqueued reads every job in the queue's stream. It walks the stream from message
// to message with next-by-subject gets, so the gaps that finished jobs leave cost
// nothing, and it creates no consumer (a work-queue stream refuses one that overlaps
// the workers').
func enqueued(ctx context.Context, js jetstream.JetStream, queueName string) ([]EnqueuedJob, error) {
	names, err := queue.NamesFor(queueName)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, names.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("queue %s does not exist: no producer or worker has opened it", queueName)
	}
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", queueName, err)
	}
	var jobs []EnqueuedJob
	for seq := uint64(1); ; {
		msg, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return jobs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("queue %s: reading message %d on: %w", queueName, seq, err)
		}
		seq = msg.Sequence + 1
		if strings.HasPrefix(msg.Subject, names.PeriodicPrefix) {
			continue // a periodic schedule, not a job
		}
		j := EnqueuedJob{
			ID:          names.MessageJobID(msg.Subject, msg.Header, msg.Sequence),
			Kind:        msg.Header.Get(queue.HeaderKind),
			Payload:     msg.Data,
			Header:      msg.Header,
			Sequence:    msg.Sequence,
			EnqueuedAt:  msg.Time,
			ScheduledAt: queue.ScheduledAt(msg.Header),
		}
		if _, at, ok := names.Firing(msg.Header); ok {
			j.ScheduledAt = at
		}
		queue.DropServerHeaders(msg.Header) // transport headers (batch, schedule): a handler never sees them
		j.MaxAttempts, _ = strconv.Atoi(msg.Header.Get(queue.HeaderMaxAttempts))
		jobs = append(jobs, j)
	}
}

// list describes jobs for a failure message.
func list(jobs []EnqueuedJob) string {
	if len(jobs) == 0 {
		return "no jobs"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d jobs:", len(jobs))
	for _, j := range jobs {
		fmt.Fprintf(&b, " [id %s, kind %q]", j.ID, j.Kind)
	}
	return b.String()
}
