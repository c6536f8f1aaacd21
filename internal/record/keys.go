package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// DeleteKey deletes raw key if its value is still at revision rev; nothing if it
// moved on. It purges the key's messages up to rev through the stream's purge API,
// which leaves no marker (a KV delete or purge would): the keys the server indexes
// (KeysUnder) are the live ones, and a write over the key expects no revision (0).
// A bucket whose stream denies purges takes no KV purge either (it refuses
// roll-ups), so this is no loss.
func (s Store) DeleteKey(ctx context.Context, key string, rev uint64) error {
	return retry.Do(ctx, func(ctx context.Context) error {
		return s.purgeKey(ctx, key, rev)
	})
}

// purgeKey purges raw key's messages with a sequence up to rev.
func (s Store) purgeKey(ctx context.Context, key string, rev uint64) error {
	req, err := json.Marshal(struct {
		Filter string `json:"filter"`
		Seq    uint64 `json:"seq"` // purges the filter's messages below it
	}{"$KV." + s.Bucket + "." + key, rev + 1})
	if err != nil {
		return err
	}
	reply, err := s.JS.Conn().RequestWithContext(ctx, apiPrefix(s.JS)+"STREAM.PURGE.KV_"+s.Bucket, req)
	if err != nil {
		return err
	}
	var resp struct {
		Error  *jetstream.APIError `json:"error,omitempty"`
		Purged uint64              `json:"purged"`
	}
	switch err := json.Unmarshal(reply.Data, &resp); {
	case err != nil:
		return fmt.Errorf("purge key %s: %w", key, err)
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeStreamNotFound:
		return nil // no bucket, no key
	case resp.Error != nil:
		return fmt.Errorf("purge key %s: %w", key, resp.Error)
	case resp.Purged > 0:
		return nil
	}
	// Nothing purged: right if the key moved on or went; not if its value is still
	// the one at rev.
	if _, now, err := s.GetKey(ctx, key); err == nil && now == rev {
		return fmt.Errorf("purge key %s: its value at revision %d is still there", key, rev)
	}
	return nil
}
