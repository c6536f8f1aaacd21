package admin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
)

// RetryingScanLimit bounds how many jobs delivered and not acknowledged Info
// examines per queue to tell the running from the retrying.
const RetryingScanLimit = 1000

// countRetrying counts the jobs waiting out a retry backoff among those delivered
// to workers and not acknowledged.
//
// The server does not say which of a consumer's unacknowledged messages were
// nak'ed with a delay, and counting records would read every record of the last
// 24 hours. But on a WorkQueue stream an acknowledged job is deleted, so the jobs
// still stored at or below the consumer's last delivered sequence are exactly the
// unacknowledged ones (NumAckPending of them). countRetrying walks those, from
// first (the stream's first sequence) to delivered, one "next message" request
// each, then reads their records, 16 at a time: state retrying counts. It costs
// two requests per unacknowledged job (the message, payload included, and its
// record), for at most RetryingScanLimit of them; partial says the limit cut the
// walk short.
func countRetrying(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, n queue.Names, first, delivered uint64) (retrying int, partial bool, err error) {
	if first == 0 || delivered < first {
		return 0, false, nil
	}
	kv, err := js.KeyValue(ctx, n.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, false, nil // no records: nothing has failed yet
	}
	if err != nil {
		return 0, false, fmt.Errorf("job records %s: %w", n.Bucket, err)
	}
	var ids []string
	for seq := first; seq <= delivered; {
		if len(ids) == RetryingScanLimit {
			partial = true
			break
		}
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break // nothing at or after seq
		}
		if err != nil {
			return 0, false, fmt.Errorf("read the job at sequence %d or after: %w", seq, err)
		}
		if m.Sequence > delivered {
			break
		}
		seq = m.Sequence + 1
		if !n.IsJobSubject(m.Subject) {
			continue // not a job (another subject of the stream)
		}
		ids = append(ids, n.MessageJobID(m.Subject, m.Header, m.Sequence))
	}

	records := record.Store{JS: js, KV: kv, Bucket: n.Bucket}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, 16)
	)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r, err := records.Get(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, record.ErrNotFound):
				// A first delivery not claimed yet: running (or buffered).
			case err != nil:
				if firstErr == nil {
					firstErr = fmt.Errorf("job record %s: %w", id, err)
				}
			case r.State == record.Retrying:
				retrying++
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, false, firstErr
	}
	return retrying, partial, nil
}
