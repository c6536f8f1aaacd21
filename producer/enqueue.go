package producer

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jobid"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/wireid"
)

// Job is one job to enqueue.
type Job struct {
	Payload     []byte
	ID          string      // dedup key; generated when empty
	Kind        string      // routing key for consumer.Mux; optional
	Header      nats.Header // extra headers, passed to the handler
	MaxAttempts int         // overrides the worker's limit when > 0
	// At delays the job: it does not start before this time. Zero, or a time that
	// has come, enqueues it to run at once. See the At option.
	At time.Time
	// Priority is the job's priority level, PriorityLow to PriorityUrgent; 0 means
	// PriorityNormal. See the Priority option.
	Priority int
	// Unique, when set, is the job's unique key: see the Unique option.
	Unique string
	// UniqueFor keeps the unique key held this long after the job ended: see the
	// UniqueFor option.
	UniqueFor time.Duration
	// Sequence, when set, is the job's sequence key: see the Sequence option.
	Sequence string
	// HaltOnDead halts the job's sequence at it when the job before it ends dead:
	// see the HaltOnDead option.
	HaltOnDead bool

	optionErr error // an EnqueueOption given a value it does not take
}

// JobInfo says where a job landed.
type JobInfo struct {
	ID       string
	Sequence uint64 // stream sequence; for a duplicate, the original's
	// Duplicate: nothing new was stored by the publish that answered. The id was
	// enqueued within the duplicate window, or is scheduled; or another job holds
	// the unique key (Unique), and ID and Sequence are that job's. A resent publish
	// (its first reply was lost: a busy or failing server) says Duplicate when the
	// first was stored after all: the job is there once, at Sequence.
	Duplicate bool
	// ScheduledAt is when a delayed job is due (At, After); zero for a job that
	// runs at once. For a duplicate, the time of this enqueue, not the original's.
	ScheduledAt time.Time
	// Waiting: a sequence's job that waits for the job of its key before it
	// (Sequence); it has no message in the stream yet, and Sequence is 0.
	Waiting bool
}

// Enqueue publishes one job and waits for the server to store it. A transient
// failure (server restarting, leader moving) is retried until ctx ends; the job id
// makes retries safe. A nil ctx is an error.
func (p *Producer) Enqueue(ctx context.Context, payload []byte, opts ...EnqueueOption) (JobInfo, error) {
	j := Job{Payload: payload}
	for _, o := range opts {
		if o != nil {
			o(&j)
		}
	}
	if ctx == nil {
		p.metrics.errors.Inc()
		return JobInfo{ID: j.ID}, fmt.Errorf("producer: enqueue job %s on queue %s: %w", j.ID, p.names.Queue, option.Nil("context"))
	}
	msg, err := p.message(ctx, &j)
	if err != nil {
		p.metrics.errors.Inc()
		return JobInfo{}, err
	}
	start := time.Now()
	if j.Sequence != "" {
		info, err := p.enqueueInSequence(ctx, &j, msg)
		p.metrics.enqueueTime.Observe(time.Since(start).Seconds())
		switch {
		case err != nil:
			p.metrics.errors.Inc()
			return info, fmt.Errorf("producer: enqueue job %s on queue %s: %w", j.ID, p.names.Queue, err)
		case info.Duplicate:
			p.metrics.duplicates.Inc()
		default:
			p.metrics.enqueued.Inc()
		}
		return info, nil
	}
	var uniq *reservation
	if j.Unique != "" {
		if uniq, err = p.reserve(ctx, &j); err != nil {
			p.metrics.errors.Inc()
			return JobInfo{ID: j.ID}, fmt.Errorf("producer: enqueue job %s on queue %s: %w", j.ID, p.names.Queue, err)
		}
		if uniq.holder != "" {
			p.metrics.enqueueTime.Observe(time.Since(start).Seconds())
			p.metrics.duplicates.Inc()
			return JobInfo{ID: uniq.holder, Sequence: uniq.seq, Duplicate: true, ScheduledAt: scheduledAt(msg)}, nil
		}
	}
	ack, err := p.publish(ctx, msg)
	if uniq != nil {
		if holder := p.settleUnique(ctx, uniq, j.ID, err); holder != "" {
			p.metrics.enqueueTime.Observe(time.Since(start).Seconds())
			p.metrics.duplicates.Inc()
			return JobInfo{ID: holder, Duplicate: true, ScheduledAt: scheduledAt(msg)}, nil
		}
	}
	p.metrics.enqueueTime.Observe(time.Since(start).Seconds())
	if err != nil {
		p.metrics.errors.Inc()
		return JobInfo{ID: j.ID}, fmt.Errorf("producer: enqueue job %s on queue %s: %w", j.ID, p.names.Queue, err)
	}
	if ack.Duplicate {
		p.metrics.duplicates.Inc()
	} else {
		p.metrics.enqueued.Inc()
	}
	return JobInfo{ID: j.ID, Sequence: ack.Sequence, Duplicate: ack.Duplicate, ScheduledAt: scheduledAt(msg)}, nil
}

// publish publishes msg and waits for its acknowledgement, retrying transient
// failures until ctx ends. A delayed job whose id is scheduled already is
// acknowledged as a duplicate.
func (p *Producer) publish(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	var ack *jetstream.PubAck
	err := retry.Do(ctx, func(ctx context.Context) error {
		var err error
		if p.group != nil && !delayed(msg) {
			ack, err = p.group.PublishMsg(ctx, msg)
		} else {
			ack, err = p.js.PublishMsg(ctx, msg)
		}
		return err
	})
	if err != nil && delayed(msg) {
		return p.scheduledDuplicate(ctx, msg, err)
	}
	return ack, err
}

// message validates j, fills in a generated id, and builds its message, carrying the
// trace of ctx when the producer traces.
func (p *Producer) message(ctx context.Context, j *Job) (*nats.Msg, error) {
	if j.optionErr != nil {
		return nil, fmt.Errorf("producer: queue %s: job %s: %w", p.names.Queue, j.ID, j.optionErr)
	}
	if j.ID == "" {
		j.ID = jobid.New()
	} else if err := queue.CheckID(j.ID); err != nil {
		return nil, fmt.Errorf("producer: queue %s: %w", p.names.Queue, err)
	}
	if len(j.Kind) > queue.MaxKindLen {
		return nil, fmt.Errorf("producer: job %s: %w: kind of %d bytes, longer than %d", j.ID, ErrInvalidName, len(j.Kind), queue.MaxKindLen)
	}
	if j.MaxAttempts < 0 {
		return nil, fmt.Errorf("producer: job %s: %w", j.ID, option.Invalid("MaxAttempts", j.MaxAttempts, "at least 1, or 0 for the worker's limit"))
	}
	level := level(j.Priority)
	if !queue.ValidPriority(level) {
		return nil, fmt.Errorf("producer: job %s: %w", j.ID, option.Invalid("Priority", j.Priority,
			fmt.Sprintf("%d (low) to %d (urgent), or 0 for normal", PriorityLow, PriorityUrgent)))
	}
	h := make(nats.Header, len(j.Header)+4)
	for k, v := range j.Header {
		h[k] = v
	}
	h.Set(queue.HeaderID, wireid.Encode(j.ID))
	h.Set(queue.HeaderEnqueue, jobid.New()) // the same on every resend of this message
	if j.Kind != "" {
		h.Set(queue.HeaderKind, j.Kind)
	}
	if j.MaxAttempts > 0 {
		h.Set(queue.HeaderMaxAttempts, strconv.Itoa(j.MaxAttempts))
	}
	if p.cfg.tracer != nil {
		p.cfg.tracer.Inject(ctx, h)
	}
	if err := checkUnique(j); err != nil {
		return nil, fmt.Errorf("producer: job %s: %w", j.ID, err)
	}
	if err := checkSequence(j); err != nil {
		return nil, fmt.Errorf("producer: job %s: %w", j.ID, err)
	}
	if j.Sequence != "" {
		h.Set(queue.HeaderSequence, wireid.Encode(j.Sequence))
	}
	if j.Unique != "" {
		h.Set(queue.HeaderUnique, wireid.Encode(j.Unique))
		if j.UniqueFor > 0 {
			h.Set(queue.HeaderUniqueFor, strconv.FormatInt(queue.KeepSeconds(j.UniqueFor), 10))
		}
	}
	msg := &nats.Msg{Subject: p.names.LevelJobSubject(level, j.ID), Data: j.Payload, Header: h}
	if !j.At.IsZero() && time.Until(j.At) > 0 {
		if p.objects.SchedulesErr != nil {
			return nil, fmt.Errorf("producer: job %s: %w", j.ID, p.objects.SchedulesErr)
		}
		p.delay(msg, j.ID, j.At)
	}
	if size, max := queue.MsgSize(h, j.Payload), p.js.Conn().MaxPayload(); int64(size+DeadLetterReserve) > max {
		return nil, fmt.Errorf("producer: job %s: %w: %d bytes of payload and %d of headers; the server takes %d, less %d kept for the job's dead letter",
			j.ID, ErrPayloadTooLarge, len(j.Payload), size-len(j.Payload), max, DeadLetterReserve)
	}
	return msg, nil
}
