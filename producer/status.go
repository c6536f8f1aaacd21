package producer

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/retry"
)

// Status returns the record of job id. A job that is enqueued but not yet claimed
// has no record in the bucket; Status finds its message in the stream and reports it
// queued, or scheduled (with ScheduledAt) while a delayed job waits for its time. An
// id that is neither queued, scheduled nor recorded is ErrNotFound (records expire
// after the queue's record TTL, 24 hours by default). A job fired by a periodic
// schedule has a record once a worker has claimed it.
func (p *Producer) Status(ctx context.Context, id string) (*Record, error) {
	if ctx == nil {
		return nil, fmt.Errorf("producer: status of job %s on queue %s: %w", id, p.names.Queue, option.Nil("context"))
	}
	if err := queue.CheckID(id); err != nil {
		return nil, fmt.Errorf("producer: status on queue %s: %w", p.names.Queue, err)
	}
	rec, msg, err := locate(id, p.names.JobSubjects(id),
		func() (*record.Record, error) { return p.records.Get(ctx, id) },
		func(subject string) (*jetstream.RawStreamMsg, error) { return p.lastMsg(ctx, subject) })
	switch {
	case err != nil:
		return nil, fmt.Errorf("producer: status of job %s on queue %s: %w", id, p.names.Queue, err)
	case rec != nil:
		return publicRecord(rec), nil
	case msg != nil:
		return queuedRecord(p.names.Queue, id, msg), nil
	}
	return nil, fmt.Errorf("producer: job %s on queue %s: %w", id, p.names.Queue, ErrNotFound)
}

// locate reads job id's stages in the order of its life, each written before the one
// before it goes: its record, its message on subjects (delayed, then at every level:
// JobSubjects), its record again. A job that moves on between two reads (the server
// fires it; a worker claims, runs and finishes it) is seen at its later stage, so
// nil, nil, nil means it was never stored, or its record expired. It returns the
// record if one was read, else the message.
func locate(id string, subjects []string, readRecord func() (*record.Record, error),
	readMsg func(subject string) (*jetstream.RawStreamMsg, error)) (*record.Record, *jetstream.RawStreamMsg, error) {
	tryRecord := func() (*record.Record, error) {
		rec, err := readRecord()
		if errors.Is(err, record.ErrNotFound) {
			return nil, nil
		}
		return rec, err
	}
	if rec, err := tryRecord(); rec != nil || err != nil {
		return rec, nil, err
	}
	for _, subject := range subjects {
		msg, err := readMsg(subject)
		if err == nil {
			return nil, msg, nil
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil, fmt.Errorf("read job %s's message: %w", id, err)
		}
	}
	rec, err := tryRecord()
	return rec, nil, err
}

// queuedRecord is the record of a job that no worker has claimed yet: its message
// msg on the job's subject (queued) or delayed subject (scheduled).
func queuedRecord(q, id string, msg *jetstream.RawStreamMsg) *Record {
	r := &Record{
		ID:         id,
		Queue:      q,
		Kind:       msg.Header.Get(queue.HeaderKind),
		Enqueue:    msg.Header.Get(queue.HeaderEnqueue),
		State:      StateQueued,
		Sequence:   msg.Sequence,
		EnqueuedAt: msg.Time,
		// A job fired from a schedule carries its due time.
		ScheduledAt: queue.ScheduledAt(msg.Header),
	}
	if msg.Header.Get(queue.HeaderNatsSchedule) != "" {
		r.State = StateScheduled
	}
	if n, err := strconv.Atoi(msg.Header.Get(queue.HeaderMaxAttempts)); err == nil {
		r.MaxAttempts = n
	}
	return r
}

// lastMsg reads subject's last message in the jobs stream, waiting while the
// stream has no leader (retry.Do), up to ctx's end.
func (p *Producer) lastMsg(ctx context.Context, subject string) (m *jetstream.RawStreamMsg, err error) {
	err = retry.Do(ctx, func(ctx context.Context) error {
		m, err = p.objects.Stream.GetLastMsgForSubject(ctx, subject)
		return err
	})
	return m, err
}
