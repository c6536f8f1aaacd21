package producer

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/queue"
)

// delay turns msg, a job message, into the message schedule of a job due at at: the
// server keeps it on the job's delayed subject and fires it once, at at, onto the
// job's own subject, with the job's headers (less the schedule's and the message
// id) and payload. The expected last sequence 0 reserves the id while the job waits:
// a second schedule of the id is refused (scheduledDuplicate).
func (p *Producer) delay(msg *nats.Msg, id string, at time.Time) {
	at = at.UTC()
	msg.Header.Set(queue.HeaderNatsSchedule, "@at "+at.Format(time.RFC3339Nano))
	msg.Header.Set(queue.HeaderNatsScheduleTarget, msg.Subject)
	msg.Header.Set(queue.HeaderNatsExpectedLastSubj, "0")
	msg.Header.Set(queue.HeaderScheduledAt, at.Format(time.RFC3339Nano))
	msg.Header.Set(queue.HeaderEnqueuedAt, time.Now().UTC().Format(time.RFC3339Nano))
	msg.Subject = p.names.DelayedSubject(id)
}

// delayed reports whether msg is a delayed job's schedule.
func delayed(msg *nats.Msg) bool { return msg.Header.Get(queue.HeaderNatsSchedule) != "" }

// scheduledAt is the due time of msg if it is a delayed job's schedule, else zero.
func scheduledAt(msg *nats.Msg) time.Time {
	if !delayed(msg) {
		return time.Time{}
	}
	return queue.ScheduledAt(msg.Header)
}

// scheduledDuplicate settles err, the failed publish of delayed job msg: a conflict
// on the expected last sequence means the id is scheduled already, which is a
// duplicate, acknowledged with the scheduled job's sequence. Other errors are
// returned as they are.
func (p *Producer) scheduledDuplicate(ctx context.Context, msg *nats.Msg, err error) (*jetstream.PubAck, error) {
	if !jserr.IsConflict(err) {
		return nil, err
	}
	ack := &jetstream.PubAck{Stream: p.names.Stream, Duplicate: true}
	m, gerr := p.lastMsg(ctx, msg.Subject)
	switch {
	case gerr == nil:
		ack.Sequence = m.Sequence
	case !errors.Is(gerr, jetstream.ErrMsgNotFound):
		return nil, errors.Join(err, gerr)
	}
	// Not found: it fired between the refusal and the read; still a duplicate.
	return ack, nil
}
