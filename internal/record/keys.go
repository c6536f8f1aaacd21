package record

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/retry"
)

// The bucket holds, beside the job records, a few values of workq's own under keys no
// job id's token takes (internal/wireid: a token never starts with "==."): a
// sequence's tail and its jobs' successors (docs/sequences.md). GetKey and KeyMsg read
// and write them as Get and WriteMsg do records.

// GetKey reads the value at raw key key, with its revision, as Get reads a record:
// from the stream leader when the store is linearizable. A key with no value (none,
// or a delete, purge or expiry marker) is ErrNotFound, with the marker's revision
// (0: none), which a write over it expects.
func (s Store) GetKey(ctx context.Context, key string) (value []byte, rev uint64, err error) {
	err = retry.Do(ctx, func(ctx context.Context) error {
		if !s.Linearizable {
			e, err := s.KV.Get(ctx, key)
			if err == nil {
				value, rev = e.Value(), e.Revision()
				return nil
			}
			if !errors.Is(err, jetstream.ErrKeyNotFound) {
				return err
			}
			// A marker may be there: its revision is read below, from the leader.
		}
		m, err := s.lastKeyMsg(ctx, key, key)
		switch {
		case errors.Is(err, ErrNotFound):
			value, rev = nil, 0
			return ErrNotFound
		case err != nil:
			return err
		case isMarker(m):
			value, rev = nil, m.Sequence
			return ErrNotFound
		}
		value, rev = m.Data, m.Sequence
		return nil
	})
	return value, rev, err
}

// KeyMsg is the message that writes value at raw key by compare-and-set on revision
// prev (0: the key has no value), never to expire (Nats-TTL: never), for an atomic
// batch with record writes.
func (s Store) KeyMsg(key string, value []byte, prev uint64) *nats.Msg {
	h := expectRevision(prev)
	h.Set(jetstream.MsgTTLHeader, "never")
	return &nats.Msg{Subject: "$KV." + s.Bucket + "." + key, Data: value, Header: h}
}

// CreateKey writes value at raw key where the key has no value (none, or a marker,
// written over), never to expire, and returns its revision: ErrConflict if another
// value is there. A write whose reply was lost and that landed is found as its value.
func (s Store) CreateKey(ctx context.Context, key string, value []byte) (uint64, error) {
	var rev uint64 // the revision the write expects: 0, then the marker's
	for range 3 {
		var ack *jetstream.PubAck
		err := retry.UntilLeader(ctx, func() error {
			var err error
			ack, err = s.JS.PublishMsg(ctx, s.KeyMsg(key, value, rev))
			return err
		})
		switch {
		case err == nil:
			return ack.Sequence, nil
		case !jserr.IsConflict(err):
			return 0, err
		}
		cur, at, err := s.GetKey(ctx, key)
		switch {
		case err == nil && bytes.Equal(cur, value):
			return at, nil
		case err == nil:
			return 0, fmt.Errorf("%w: %s: a value is there", ErrConflict, key)
		case !errors.Is(err, ErrNotFound):
			return 0, err
		}
		rev = at
	}
	return 0, fmt.Errorf("%w: %s: kept changing", ErrConflict, key)
}

// DeleteKey deletes raw key if its value is still at revision rev; nothing if it
// moved on. It is a KV purge by compare-and-set, whose marker expires after
// deleteMarkerTTL (the bucket takes a TTL per write wherever these keys are
// written), so that the keys the server indexes (KeysUnder) are the live ones and
// those deleted in the last second or two. Until it expires, a write over the key
// expects the marker's revision (GetKey says it).
//
// A marker, not a removal: the purge API (which leaves none) lost deletes under
// chaos, on a single server SIGKILLed and on a cluster losing its leader, while a
// marker is a write that stays the subject's last message. A value that comes back
// after its marker expired (a server's recovery can undo the purge of the value
// behind it) is one of an ended job: the readers check the records
// (workflow.SequenceBacklog).
func (s Store) DeleteKey(ctx context.Context, key string, rev uint64) error {
	err := retry.Do(ctx, func(ctx context.Context) error {
		return s.KV.Purge(ctx, key, jetstream.LastRevision(rev), jetstream.PurgeTTL(deleteMarkerTTL))
	})
	if jserr.IsConflict(err) {
		return nil
	}
	return err
}

// deleteMarkerTTL is how long the marker DeleteKey leaves lives: the server's
// shortest TTL per write.
const deleteMarkerTTL = time.Second
