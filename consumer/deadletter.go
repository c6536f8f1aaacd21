package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/wireid"
)

// publishDead publishes j's dead letter: a copy of its message with headers saying
// why it died (reason), shrunk to fit the server's max payload (see fitDeadLetter),
// so that a job published without leaving DeadLetterReserve free is dead-lettered all
// the same. Its message id (the job's and its message's sequence) makes publishing it
// again idempotent within the duplicate window: a delivery whose publish failed is put
// back, and the next, finding the record dead, publishes it then.
func (w *Worker) publishDead(ctx context.Context, j *Job, reason error) error {
	wctx, cancel := w.writeContext(ctx)
	defer cancel()
	msg, cut := deadMessage(deadJob{
		id: j.id, queue: w.names.Queue, attempts: j.attempt, subject: j.msg.Subject(),
		sequence: j.md.Sequence.Stream, header: j.msg.Headers(), data: j.msg.Data(),
	}, w.names.DeadSubject, reason, time.Now(), w.js.Conn().MaxPayload())
	if cut.any() {
		level := w.log.Warn
		if cut.payload > 0 || len(cut.headers) > 0 {
			level = w.log.Error
		}
		level(fmt.Sprintf("dead letter of job %s shrunk to fit the server's max payload", j.id), "job", j.id, "cut", cut.String())
	}
	return retry.Do(wctx, func(c context.Context) error {
		_, err := w.js.PublishMsg(c, msg)
		return err
	})
}

// deadJob is what a dead letter is made of: the job's message and where it was.
type deadJob struct {
	id, queue, subject string
	attempts           int
	sequence           uint64
	header             nats.Header
	data               []byte
}

// deadMessage is the dead-letter copy of d: the original payload and headers, and
// Workq-* headers saying which job it was, where it came from and why it died,
// shrunk to fit maxPayload (≤ 0: no limit) as fitDeadLetter does; cut says what
// was left out.
func deadMessage(d deadJob, deadSubject string, reason error, at time.Time, maxPayload int64) (*nats.Msg, deadCut) {
	h := nats.Header{}
	for k, v := range d.header {
		if k != queue.HeaderID {
			h[k] = v
		}
	}
	h.Set(queue.HeaderID, fmt.Sprintf("dead:%s:%d", wireid.Encode(d.id), d.sequence))
	h.Set(queue.HeaderDeadID, wireid.Encode(d.id))
	h.Set(queue.HeaderDeadQueue, d.queue)
	h.Set(queue.HeaderDeadAttempts, strconv.Itoa(d.attempts))
	h.Set(queue.HeaderDeadError, headerSafe(reason.Error()))
	h.Set(queue.HeaderDeadSubject, d.subject)
	h.Set(queue.HeaderDeadSequence, strconv.FormatUint(d.sequence, 10))
	h.Set(queue.HeaderDeadAt, at.UTC().Format(time.RFC3339Nano))
	msg := &nats.Msg{Subject: deadSubject, Data: d.data, Header: h}
	var cut deadCut
	if maxPayload > 0 {
		cut = fitDeadLetter(msg, maxPayload)
	}
	return msg, cut
}

// minDeadError is how much of the error a shrunk dead letter keeps.
const minDeadError = 64

// droppable are the dead-letter headers left out, in this order, when a dead letter
// does not fit: each is known some other way (the dead letter's own timestamp, the
// stream it is in, the job id).
var droppable = []string{queue.HeaderDeadAt, queue.HeaderDeadQueue, queue.HeaderDeadSubject}

// deadCut says what fitDeadLetter left out of a dead letter.
type deadCut struct {
	errorCut int      // bytes cut from Workq-Error
	dropped  []string // workq headers left out
	headers  []string // the job's own headers left out
	payload  int      // the payload's original size if it was truncated, else 0
}

func (c deadCut) any() bool {
	return c.errorCut > 0 || len(c.dropped) > 0 || len(c.headers) > 0 || c.payload > 0
}

func (c deadCut) String() string {
	var parts []string
	if c.errorCut > 0 {
		parts = append(parts, fmt.Sprintf("%d bytes of %s", c.errorCut, queue.HeaderDeadError))
	}
	if len(c.dropped) > 0 {
		parts = append(parts, strings.Join(c.dropped, ", "))
	}
	if len(c.headers) > 0 {
		parts = append(parts, "the job's headers "+strings.Join(c.headers, ", "))
	}
	if c.payload > 0 {
		parts = append(parts, fmt.Sprintf("the payload's end (%d bytes originally)", c.payload))
	}
	return strings.Join(parts, "; ")
}

// fitDeadLetter shrinks msg until its headers and payload, as the server counts them,
// fit maxPayload, so that a dead letter can always be written: a job never loops
// because its dead letter is too large. A job enqueued by a workq producer leaves
// queue.DeadLetterReserve free and never needs this; one published by another client
// may take the whole max payload. In order, until it fits:
//
//  1. Workq-Error is cut, to no less than minDeadError bytes (the record keeps more);
//  2. Workq-Dead-At, Workq-Queue and Workq-Original-Subject are left out;
//  3. the job's own headers are left out, largest first, while the headers alone
//     leave no room for a payload, and listed in Workq-Headers-Dropped;
//  4. the payload is truncated, and Workq-Payload-Truncated gives its original size.
//
// The message id (which makes the copy idempotent), Workq-Job-Id, Workq-Attempts and
// Workq-Original-Sequence always stay; they take well under 1 KiB.
func fitDeadLetter(msg *nats.Msg, maxPayload int64) deadCut {
	var cut deadCut
	h := msg.Header
	over := func() int64 { return int64(queue.MsgSize(h, msg.Data)) - maxPayload }
	if over() <= 0 {
		return cut
	}
	// 1. The error.
	if e := h.Get(queue.HeaderDeadError); len(e) > minDeadError {
		keep := max(int64(len(e))-over()-int64(len("…")), minDeadError)
		short := cutUTF8(e, int(keep)) + "…"
		if len(short) < len(e) {
			h.Set(queue.HeaderDeadError, short)
			cut.errorCut = len(e) - len(short) + len("…")
		}
	}
	// 2. Workq headers known some other way.
	for _, k := range droppable {
		if over() <= 0 {
			return cut
		}
		h.Del(k)
		cut.dropped = append(cut.dropped, k)
	}
	if over() <= 0 {
		return cut
	}
	// 3. The job's own headers, while they leave no room for a payload.
	original := len(msg.Data)
	marker := queue.HeaderLineSize(queue.HeaderPayloadTruncated, strconv.Itoa(original))
	own := ownHeaders(h)
	for len(own) > 0 && int64(queue.HeaderSize(h)+marker) >= maxPayload {
		k := own[0]
		own = own[1:]
		h.Del(k)
		cut.headers = append(cut.headers, k)
		h.Set(queue.HeaderHeadersDropped, strings.Join(cut.headers, ","))
	}
	if over() <= 0 {
		return cut
	}
	// 4. The payload.
	room := max(maxPayload-int64(queue.HeaderSize(h)+marker), 0)
	h.Set(queue.HeaderPayloadTruncated, strconv.Itoa(original))
	msg.Data = msg.Data[:min(int64(original), room)]
	cut.payload = original
	return cut
}

// ownHeaders lists the job's own headers in h (not the ones a dead letter sets),
// largest first.
func ownHeaders(h nats.Header) []string {
	var keys []string
	for k := range h {
		switch k {
		case queue.HeaderID, queue.HeaderDeadID, queue.HeaderDeadAttempts, queue.HeaderDeadError, queue.HeaderDeadSubject,
			queue.HeaderDeadSequence, queue.HeaderDeadQueue, queue.HeaderDeadAt, queue.HeaderHeadersDropped, queue.HeaderPayloadTruncated:
			continue
		}
		keys = append(keys, k)
	}
	size := func(k string) int {
		n := 0
		for _, v := range h[k] {
			n += queue.HeaderLineSize(k, v)
		}
		return n
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(size(b), size(a)), strings.Compare(a, b)) })
	return keys
}

// cutUTF8 is s cut to at most n bytes, not inside a character.
func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// headerSafe fits an error into one header value: one line, at most
// queue.MaxDeadError bytes. A panic's stack stays in the job record's last_error and
// the log.
func headerSafe(s string) string {
	s = firstLine(errors.New(s))
	return cutUTF8(s, queue.MaxDeadError)
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return s
}
