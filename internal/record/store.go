package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jsx"
)

// ErrNotFound means the bucket holds no record for the id.
var ErrNotFound = errors.New("no job record")

// ErrConflict means a compare-and-set lost: the record changed since it was read.
var ErrConflict = errors.New("job record changed")

// Store reads and writes job records in a KV bucket.
//
// Writes are publishes to the bucket's subject with an expected last sequence for the
// key, sent asynchronously: many jobs' claims and commits then share the connection's
// writes and the server's replies instead of each waiting out its own round trip.
type Store struct {
	JS     jetstream.JetStream
	KV     jetstream.KeyValue
	Bucket string
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

// Create writes r if id has no live record; r.Revision is set to the new revision. It
// fails with ErrConflict otherwise.
func (s Store) Create(ctx context.Context, r *Record) error {
	err := s.write(ctx, r, jetstream.WithExpectLastSequencePerSubject(0))
	if !errors.Is(err, ErrConflict) {
		return err
	}
	// The key has history: a live record, or a delete marker that KV's own Create
	// writes over.
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	rev, err := s.KV.Create(ctx, r.ID, b)
	if jsx.IsConflict(err) {
		return fmt.Errorf("%w: %s: %w", ErrConflict, r.ID, err)
	}
	if err != nil {
		return err
	}
	r.Revision = rev
	return nil
}

// Update writes r if the record is still at revision prev; r.Revision is set to the
// new revision. It fails with ErrConflict otherwise.
func (s Store) Update(ctx context.Context, r *Record, prev uint64) error {
	return s.write(ctx, r, jetstream.WithExpectLastSequencePerSubject(prev))
}

// Put writes r whatever is there (the unfenced path).
func (s Store) Put(ctx context.Context, r *Record) error {
	return s.write(ctx, r)
}

func (s Store) write(ctx context.Context, r *Record, opts ...jetstream.PublishOpt) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: "$KV." + s.Bucket + "." + r.ID, Data: b}
	var ack *jetstream.PubAck
	f, err := s.JS.PublishMsgAsync(msg, opts...)
	if err == nil {
		select {
		case ack = <-f.Ok():
		case err = <-f.Err():
		case <-ctx.Done():
			err = ctx.Err()
		}
	} else if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		// The connection's async window is full (other publishers share it): wait
		// for this one write instead.
		ack, err = s.JS.PublishMsg(ctx, msg, opts...)
	}
	if jsx.IsConflict(err) {
		return fmt.Errorf("%w: %s: %w", ErrConflict, r.ID, err)
	}
	if err != nil {
		return err
	}
	r.Revision = ack.Sequence
	return nil
}
