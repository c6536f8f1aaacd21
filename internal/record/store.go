package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jsx"
)

// ErrNotFound means the bucket holds no record for the id.
var ErrNotFound = errors.New("no job record")

// ErrConflict means a compare-and-set lost: the record changed since it was read.
var ErrConflict = errors.New("job record changed")

// Store reads and writes job records in a KV bucket.
type Store struct {
	KV jetstream.KeyValue
}

// Get reads the record of id with its revision.
func (s Store) Get(ctx context.Context, id string) (*Record, error) {
	e, err := s.KV.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, fmt.Errorf("job record %s at revision %d: %w", id, e.Revision(), err)
	}
	r.Revision = e.Revision()
	return &r, nil
}

// Create writes r if id has no live record; r.Revision is set to the new revision.
func (s Store) Create(ctx context.Context, r *Record) error {
	return s.write(ctx, r, func(b []byte) (uint64, error) { return s.KV.Create(ctx, r.ID, b) })
}

// Update writes r if the record is still at revision prev; r.Revision is set to the
// new revision. It fails with ErrConflict otherwise.
func (s Store) Update(ctx context.Context, r *Record, prev uint64) error {
	return s.write(ctx, r, func(b []byte) (uint64, error) { return s.KV.Update(ctx, r.ID, b, prev) })
}

// Put writes r whatever is there (the unfenced path).
func (s Store) Put(ctx context.Context, r *Record) error {
	return s.write(ctx, r, func(b []byte) (uint64, error) { return s.KV.Put(ctx, r.ID, b) })
}

func (s Store) write(ctx context.Context, r *Record, op func([]byte) (uint64, error)) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	rev, err := op(b)
	if jsx.IsConflict(err) {
		return fmt.Errorf("%w: %s: %w", ErrConflict, r.ID, err)
	}
	if err != nil {
		return err
	}
	r.Revision = rev
	return nil
}
