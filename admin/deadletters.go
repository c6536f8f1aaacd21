package admin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/wireid"
)

// DeadLetter is one message of a queue's dead-letter stream.
type DeadLetter struct {
	Sequence uint64              `json:"sequence"` // in the dead-letter stream
	JobID    string              `json:"job_id"`
	Kind     string              `json:"kind,omitempty"`
	Attempts int                 `json:"attempts"`
	Error    string              `json:"error"`
	DeadAt   time.Time           `json:"dead_at"`
	Subject  string              `json:"original_subject"`
	OrigSeq  uint64              `json:"original_sequence"`
	Size     int                 `json:"size"`
	Payload  []byte              `json:"payload,omitempty"` // base64 in JSON
	Header   map[string][]string `json:"headers,omitempty"`
}

func deadLetterOf(seq uint64, t time.Time, h nats.Header, data []byte, withBody bool) DeadLetter {
	d := DeadLetter{
		Sequence: seq,
		JobID:    deadJobID(h.Get(queue.HeaderDeadID)),
		Kind:     h.Get(queue.HeaderKind),
		Error:    h.Get(queue.HeaderDeadError),
		Subject:  h.Get(queue.HeaderDeadSubject),
		Size:     len(data),
	}
	d.Attempts, _ = strconv.Atoi(h.Get(queue.HeaderDeadAttempts))
	d.OrigSeq, _ = strconv.ParseUint(h.Get(queue.HeaderDeadSequence), 10, 64)
	if at, err := time.Parse(time.RFC3339Nano, h.Get(queue.HeaderDeadAt)); err == nil {
		d.DeadAt = at
	} else {
		d.DeadAt = t
	}
	if withBody {
		d.Payload = data
		d.Header = h
	}
	return d
}

// deadStream returns the queue's dead-letter stream; a queue without one has none.
func (a *Admin) deadStream(ctx context.Context, name string) (queue.Names, jetstream.Stream, error) {
	n, err := names(ctx, name)
	if err != nil {
		return n, nil, err
	}
	if _, err := a.jobsStream(ctx, n); err != nil {
		return n, nil, err
	}
	var s jetstream.Stream
	err = retry.Do(ctx, func(ctx context.Context) error {
		var err error
		s, err = a.js.Stream(ctx, n.DeadStream)
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return n, nil, nil
	}
	if err != nil {
		return n, nil, fmt.Errorf("queue %s: dead letters %s: %w", n.Queue, n.DeadStream, err)
	}
	return n, s, nil
}

// DeadLetters returns up to limit dead letters of the queue, oldest first (limit ≤ 0:
// all), with payloads and headers if withBody.
func (a *Admin) DeadLetters(ctx context.Context, name string, limit int, withBody bool) ([]DeadLetter, error) {
	return a.DeadLettersAfter(ctx, name, 0, limit, withBody)
}

// DeadLettersAfter is DeadLetters from the first dead letter after sequence after:
// to page on, pass the last Sequence of a page.
func (a *Admin) DeadLettersAfter(ctx context.Context, name string, after uint64, limit int, withBody bool) ([]DeadLetter, error) {
	n, s, err := a.deadStream(ctx, name)
	if err != nil || s == nil {
		return nil, err
	}
	var out []DeadLetter
	err = queue.ScanFrom(ctx, s, after+1, false, func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
		out = append(out, deadLetterOf(md.Sequence.Stream, md.Timestamp, m.Headers(), m.Data(), withBody))
		return limit <= 0 || len(out) < limit
	})
	if err != nil {
		return nil, fmt.Errorf("queue %s: read dead letters: %w", n.Queue, err)
	}
	return out, nil
}

// DeadLetter returns the dead letter at sequence seq of the queue's dead-letter
// stream, with its payload and headers; ErrNoDeadLetter if there is none.
func (a *Admin) DeadLetter(ctx context.Context, name string, seq uint64) (*DeadLetter, error) {
	n, s, err := a.deadStream(ctx, name)
	if err != nil {
		return nil, err
	}
	if s == nil || seq == 0 {
		return nil, fmt.Errorf("queue %s: dead letter %d: %w", n.Queue, seq, ErrNoDeadLetter)
	}
	var m *jetstream.RawStreamMsg
	err = retry.Do(ctx, func(ctx context.Context) error {
		var err error
		m, err = s.GetMsg(ctx, seq)
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("queue %s: dead letter %d: %w", n.Queue, seq, ErrNoDeadLetter)
	}
	if err != nil {
		return nil, fmt.Errorf("queue %s: dead letter %d: %w", n.Queue, seq, err)
	}
	d := deadLetterOf(m.Sequence, m.Time, m.Header, m.Data, true)
	return &d, nil
}

// Selection picks dead letters: every one, or those with one of the job ids or
// dead-letter sequences given.
type Selection struct {
	All       bool
	IDs       []string
	Sequences []uint64
}

func (sel Selection) match(d DeadLetter) bool {
	if sel.All {
		return true
	}
	for _, id := range sel.IDs {
		if d.JobID == id {
			return true
		}
	}
	for _, seq := range sel.Sequences {
		if d.Sequence == seq {
			return true
		}
	}
	return false
}

func (sel Selection) String() string {
	if sel.All {
		return "all"
	}
	var parts []string
	parts = append(parts, sel.IDs...)
	for _, s := range sel.Sequences {
		parts = append(parts, "#"+strconv.FormatUint(s, 10))
	}
	return strings.Join(parts, ", ")
}

// Requeued is one dead letter put back on its queue.
type Requeued struct {
	JobID    string `json:"job_id"`
	DeadSeq  uint64 `json:"dead_sequence"`
	Sequence uint64 `json:"sequence"` // the job's new stream sequence
}

// RequeueDead puts the selected dead letters back on their queue as new instances of
// their jobs, oldest first, and returns those it requeued. Each is published to
// workq.<queue>.jobs.<id> (or its priority level's subject) with its payload and its original headers (without the
// dead-letter ones) and the message id "<id>:requeue:<dead sequence>" — not a job id,
// so the worker takes the id from the subject, while the server's dedup makes a
// repeated requeue of the same dead letter store it once (within the queue's
// duplicate window). Only once the server has stored it is the dead letter deleted:
// an interrupted requeue loses nothing, and running it again completes it. progress,
// if not nil, is called after each one. On error the requeued so far are returned.
func (a *Admin) RequeueDead(ctx context.Context, name string, sel Selection, progress func(Requeued), opts ...RequeueOption) ([]Requeued, error) {
	var ro requeueOptions
	for _, o := range opts {
		if o != nil {
			o(&ro)
		}
	}
	if len(ro.kind) > queue.MaxKindLen {
		return nil, fmt.Errorf("queue %s: requeue: %w", name, option.Invalid("RequeueKind", fmt.Sprintf("of %d bytes", len(ro.kind)),
			fmt.Sprintf("at most %d bytes", queue.MaxKindLen)))
	}
	n, s, err := a.deadStream(ctx, name)
	if err != nil {
		return nil, err
	}
	var todo []DeadLetter
	if s != nil {
		err = queue.Scan(ctx, s, false, func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
			d := deadLetterOf(md.Sequence.Stream, md.Timestamp, m.Headers(), m.Data(), true)
			if sel.match(d) {
				todo = append(todo, d)
			}
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("queue %s: read dead letters: %w", n.Queue, err)
		}
	}
	if len(todo) == 0 {
		if sel.All {
			return nil, nil
		}
		return nil, fmt.Errorf("queue %s: %w: %s", n.Queue, ErrNoDeadLetter, sel)
	}
	var done []Requeued
	for _, d := range todo {
		r, err := requeueOne(ctx, a.js, s, n, d, ro)
		if err != nil {
			return done, err
		}
		done = append(done, r)
		if progress != nil {
			progress(r)
		}
	}
	return done, nil
}

// RequeueOption changes the jobs RequeueDead puts back.
type RequeueOption func(*requeueOptions)

type requeueOptions struct {
	kind string
}

// RequeueKind gives the requeued jobs kind k (their Workq-Kind), in place of the one
// they died with: for a job enqueued without a kind, or under one no handler takes,
// that a consumer.Mux dead-lettered with ErrUnknownKind. The empty kind leaves the
// jobs' own.
func RequeueKind(k string) RequeueOption { return func(o *requeueOptions) { o.kind = k } }

func requeueOne(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, n queue.Names, d DeadLetter, ro requeueOptions) (Requeued, error) {
	id := d.JobID
	level, subjectTok, ok := n.JobLevel(d.Subject)
	if !ok {
		level = queue.PriorityNormal
	}
	if queue.CheckID(id) != nil {
		// A dead letter from another tool: fall back on the original subject's id.
		id, _ = wireid.Decode(subjectTok)
		if queue.CheckID(id) != nil {
			return Requeued{}, fmt.Errorf("queue %s: dead letter #%d has no usable job id (%q)", n.Queue, d.Sequence, d.JobID)
		}
	}
	if size := nats.Header(d.Header).Get(queue.HeaderPayloadTruncated); size != "" {
		// Requeued, it would run on the part of its payload that fitted.
		return Requeued{}, fmt.Errorf("queue %s: dead letter #%d (job %s) kept only part of its payload (%s bytes originally); it cannot be requeued as it was",
			n.Queue, d.Sequence, id, size)
	}
	h := nats.Header{}
	for k, v := range d.Header {
		if strings.HasPrefix(k, "Workq-") && isDeadHeader(k) || k == queue.HeaderID {
			continue
		}
		h[k] = v
	}
	queue.DropServerHeaders(h)
	// A requeue is a new run, not the delayed job's firing again: a worker would take
	// a copy with the firing's due time for a second copy of it, and drop it.
	h.Del(queue.HeaderScheduledAt)
	h.Del(queue.HeaderEnqueuedAt)
	if ro.kind != "" {
		h.Set(queue.HeaderKind, ro.kind)
	}
	h.Set(queue.HeaderID, fmt.Sprintf("%s:requeue:%d", wireid.Encode(id), d.Sequence))
	// A new enqueue, the same for every try of this requeue: the dead record names
	// the enqueue that died, and a copy of it would only be terminated again.
	h.Set(queue.HeaderEnqueue, fmt.Sprintf("requeue:%d", d.Sequence))
	msg := &nats.Msg{Subject: n.LevelJobSubject(level, id), Data: d.Payload, Header: h} // at its priority level
	var ack *jetstream.PubAck
	err := retry.Do(ctx, func(ctx context.Context) error {
		var err error
		ack, err = js.PublishMsg(ctx, msg, jetstream.WithExpectStream(n.Stream))
		return err
	})
	if err != nil {
		return Requeued{}, fmt.Errorf("queue %s: requeue job %s (dead letter #%d): %w", n.Queue, id, d.Sequence, err)
	}
	err = retry.Do(ctx, func(ctx context.Context) error {
		err := s.DeleteMsg(ctx, d.Sequence)
		if errors.Is(err, jetstream.ErrMsgNotFound) || jserr.HasCode(err, jetstream.JSErrCodeMessageNotFound) {
			return nil // deleted by a concurrent requeue
		}
		return err
	})
	if err != nil {
		return Requeued{}, fmt.Errorf("queue %s: job %s requeued as #%d, but deleting dead letter #%d failed (run the requeue again to finish it): %w",
			n.Queue, id, ack.Sequence, d.Sequence, err)
	}
	return Requeued{JobID: id, DeadSeq: d.Sequence, Sequence: ack.Sequence}, nil
}

func isDeadHeader(k string) bool {
	switch k {
	case queue.HeaderDeadID, queue.HeaderDeadAttempts, queue.HeaderDeadError, queue.HeaderDeadSubject,
		queue.HeaderDeadSequence, queue.HeaderDeadQueue, queue.HeaderDeadAt,
		queue.HeaderPayloadTruncated, queue.HeaderHeadersDropped:
		return true
	}
	return false
}

// PurgeDead deletes every dead letter of the queue and returns how many it deleted.
func (a *Admin) PurgeDead(ctx context.Context, name string) (uint64, error) {
	n, s, err := a.deadStream(ctx, name)
	if err != nil || s == nil {
		return 0, err
	}
	before := s.CachedInfo().State.Msgs
	if err := retry.Do(ctx, func(ctx context.Context) error { return s.Purge(ctx) }); err != nil {
		return 0, fmt.Errorf("queue %s: purge dead letters %s: %w", n.Queue, n.DeadStream, err)
	}
	return before, nil
}

// deadJobID is the job id a dead letter's Workq-Job-Id header carries as its token
// (internal/wireid); a value that is no token, from another tool, as it is.
func deadJobID(tok string) string {
	if id, ok := wireid.Decode(tok); ok {
		return id
	}
	return tok
}
