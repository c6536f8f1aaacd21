package consumer

import (
	"context"
	"time"

	"github.com/workq/workq/internal/record"
)

// putRecord writes j's record unfenced (writeOutcome), best effort: a lost write only
// makes Status less precise.
func (w *Worker) putRecord(ctx context.Context, j *Job, s record.State, herr error, delay time.Duration) {
	now := time.Now()
	r := &record.Record{
		ID: j.id, Queue: w.names.Queue, Kind: j.kind, State: s, Attempt: j.attempt,
		MaxAttempts: j.maxAttempts, Enqueue: j.enqueue, Sequence: j.md.Sequence.Stream,
		Worker: &w.identity, EnqueuedAt: j.enqueuedAt,
	}
	if herr != nil {
		r.LastError = recordError(herr.Error())
	}
	if s.Terminal() {
		r.FinishedAt = now
	} else {
		r.RetryAt = now.Add(delay)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := w.records.Put(wctx, r); err != nil {
		w.log.Debug("job record not written", "job", j.id, "err", err)
	}
}
