package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/jsx"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
)

// deadLetter moves j to the dead-letter stream: the record says dead (fenced on the
// claim when fence is set), a copy of the message with headers saying why is
// published, and the original is terminated. If the copy cannot be published the
// job is redelivered later and, finding its record dead, publishes it then; the
// copy's message id makes that idempotent within the duplicate window.
func (w *Worker) deadLetter(ctx context.Context, j *Job, reason error, fence bool) {
	if fence {
		err := w.update(ctx, j, func(next *record.Record) {
			next.State, next.LastError, next.FinishedAt, next.RetryAt = record.Dead, reason.Error(), time.Now(), time.Time{}
		})
		if err != nil {
			w.outcomeFailed(j, "dead-letter", err)
			return
		}
	}
	wctx, cancel := w.writeContext(ctx)
	defer cancel()
	msg := w.deadMessage(j, reason)
	err := jsx.Retry(wctx, func(c context.Context) error {
		_, err := w.js.PublishMsg(c, msg)
		return err
	})
	if err != nil {
		w.stats.errors.Add(1)
		j.metrics.failed.Inc()
		w.log.Error("publishing dead letter failed; the job will be redelivered", "job", j.id, "err", err)
		j.nak(w.cfg.backoff(1))
		return
	}
	j.term()
	if fence || !j.fenced {
		w.stats.dead.Add(1)
		j.metrics.dead.Inc()
		w.log.Warn(fmt.Sprintf("job %s moved to dead letters", j.id), "job", j.id, "attempt", j.attempt, "reason", firstLine(reason))
	}
}

// deadMessage is the dead-letter copy of j: the original payload and headers, and
// Workq-* headers saying which job it was, where it came from and why it died.
func (w *Worker) deadMessage(j *Job, reason error) *nats.Msg {
	h := nats.Header{}
	for k, v := range j.msg.Headers() {
		if k != queue.HeaderID {
			h[k] = v
		}
	}
	h.Set(queue.HeaderID, fmt.Sprintf("dead:%s:%d", j.id, j.md.Sequence.Stream))
	h.Set(queue.HeaderDeadID, j.id)
	h.Set(queue.HeaderDeadQueue, w.names.Queue)
	h.Set(queue.HeaderDeadAttempts, strconv.Itoa(j.attempt))
	h.Set(queue.HeaderDeadError, headerSafe(reason.Error()))
	h.Set(queue.HeaderDeadSubject, j.msg.Subject())
	h.Set(queue.HeaderDeadSequence, strconv.FormatUint(j.md.Sequence.Stream, 10))
	h.Set(queue.HeaderDeadAt, time.Now().UTC().Format(time.RFC3339Nano))
	return &nats.Msg{Subject: w.names.DeadSubject, Data: j.msg.Data(), Header: h}
}

// headerSafe fits an error into one header value: one line, at most 1 KiB. A panic's
// stack stays in the job record's last_error and the log.
func headerSafe(s string) string {
	s = firstLine(errors.New(s))
	if len(s) > 1024 {
		s = s[:1024]
	}
	return s
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return s
}
