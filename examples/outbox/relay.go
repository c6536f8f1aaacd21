package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/workq/workq/producer"
)

// DefaultBatch is how many rows a Relay reads at a time when Batch is 0.
const DefaultBatch = 100

// Relay moves rows from a Store onto a queue: enqueue, then mark sent, row by row.
type Relay struct {
	Store    Store
	Producer *producer.Producer
	// Batch is how many rows one Once reads. Default DefaultBatch.
	Batch int
	// Logger logs failed passes of Run. Default slog.Default().
	Logger *slog.Logger
}

// Once relays the pending rows of one batch, oldest first, and returns how many it
// marked sent. Each row is enqueued with its ID as the job id, then marked sent;
// if the mark fails (or the relay dies before it), the row stays pending and the
// next pass enqueues it again under the same id, which the queue's duplicate window
// absorbs. Once stops at the first row it cannot enqueue or mark, and returns the
// error: it never skips a row.
func (r *Relay) Once(ctx context.Context) (int, error) {
	batch := r.Batch
	if batch == 0 {
		batch = DefaultBatch
	}
	rows, err := r.Store.Pending(ctx, batch)
	if err != nil {
		return 0, fmt.Errorf("outbox: read pending rows: %w", err)
	}
	sent := 0
	for _, row := range rows {
		if _, err := r.Producer.Enqueue(ctx, row.Payload, producer.ID(row.ID), producer.Kind(row.Kind)); err != nil {
			return sent, fmt.Errorf("outbox: enqueue row %s: %w", row.ID, err)
		}
		if err := r.Store.MarkSent(ctx, row.ID); err != nil {
			return sent, fmt.Errorf("outbox: mark row %s sent: %w", row.ID, err)
		}
		sent++
	}
	return sent, nil
}

// Run relays until ctx ends: a pass whenever the last one filled a batch, else
// after every. A failed pass is logged and tried again after every.
func (r *Relay) Run(ctx context.Context, every time.Duration) error {
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	batch := r.Batch
	if batch == 0 {
		batch = DefaultBatch
	}
	for {
		n, err := r.Once(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("outbox relay: pass failed; trying again", "err", err, "sent", n, "in", every)
		}
		if err == nil && n == batch {
			continue // more may be waiting
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}
