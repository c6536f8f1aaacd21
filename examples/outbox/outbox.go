package outbox

import "context"

// Row is one job waiting in the outbox.
type Row struct {
	// ID is the job id (producer.ID). It must stay the same on every enqueue of
	// the row: it is what makes a second enqueue a no-op.
	ID string
	// Kind is the job's kind (producer.Kind); "" for none.
	Kind string
	// Payload is the job's data.
	Payload []byte
}

// Store is the outbox as the relay sees it.
type Store interface {
	// Pending returns up to limit rows not yet marked sent, oldest first.
	Pending(ctx context.Context, limit int) ([]Row, error)
	// MarkSent marks the row with id sent: Pending returns it no more.
	MarkSent(ctx context.Context, id string) error
}
