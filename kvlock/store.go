package kvlock

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/retry"
)

// The three operations on a lock key. Every write is a compare-and-set on the key's
// last revision (its stream sequence), checked atomically by the server. Each waits
// while the bucket has no leader (retry.Do, retry.UntilLeader), up to ctx's
// end.

// slotState is what a process knows about one key: its revision and whether it
// holds a live value (and whose) or a delete/purge/expiry marker or nothing.
type slotState struct {
	known    bool
	rev      uint64 // 0: the key has no message at all
	free     bool
	rec      record
	recOK    bool
	observed time.Time // when this process first saw rev (monotonic)
	tried    bool      // a write expecting rev was attempted and failed
	// releasedBy is the grant whose release left the marker at rev (free), as the
	// marker says (headerReleasedBy); "" if another purge left it, or none.
	releasedBy string
}

// headerReleasedBy names, on a release's purge marker, the grant released: a
// release whose reply was lost reads the marker and knows it as its own.
const headerReleasedBy = "Kvlock-Released-By"

// write publishes data to key if the key's last revision is expect (0: the key has
// no message), with a server-side TTL. KeyValue.Update would drop the TTL, hence
// the raw publish.
func (l *Locker) write(ctx context.Context, key string, data []byte, expect uint64, ttl time.Duration) (uint64, error) {
	m := &nats.Msg{Subject: l.subjPre + key, Data: data, Header: nats.Header{}}
	var pa *jetstream.PubAck
	err := retry.UntilLeader(ctx, func() (err error) {
		pa, err = l.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(expect), jetstream.WithMsgTTL(ttl))
		return err
	})
	if err != nil {
		return 0, err
	}
	return pa.Sequence, nil
}

// purge replaces key's value with a purge marker if its last revision is expect.
// The marker expires after markerTTL so released names do not accumulate; watchers
// see it as KeyValuePurge.
func (l *Locker) purge(ctx context.Context, key string, expect uint64, by string) (uint64, error) {
	m := nats.NewMsg(l.subjPre + key)
	m.Header.Set("KV-Operation", "PURGE")
	if by != "" {
		m.Header.Set(headerReleasedBy, by)
	}
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	var pa *jetstream.PubAck
	err := retry.UntilLeader(ctx, func() (err error) {
		pa, err = l.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(expect), jetstream.WithMsgTTL(markerTTL))
		return err
	})
	if err != nil {
		return 0, err
	}
	return pa.Sequence, nil
}

// read returns key's current state.
func (l *Locker) read(ctx context.Context, key string) (slotState, error) {
	var m *jetstream.RawStreamMsg
	err := retry.Do(ctx, func(ctx context.Context) (err error) {
		m, err = l.stream.GetLastMsgForSubject(ctx, l.subjPre+key)
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return slotState{known: true, free: true, observed: now()}, nil
	}
	if err != nil {
		return slotState{}, err
	}
	return stateOf(m.Sequence, m.Header, m.Data), nil
}

// stateOf classifies a message of the bucket: a delete, purge or limit (expiry)
// marker means free; anything else is a holder's value.
func stateOf(rev uint64, h nats.Header, data []byte) slotState {
	st := slotState{known: true, rev: rev, observed: now()}
	if h.Get("KV-Operation") != "" || h.Get(jetstream.MarkerReasonHeader) != "" {
		st.free = true
		st.releasedBy = h.Get(headerReleasedBy)
		return st
	}
	st.rec, st.recOK = parseRecord(data)
	return st
}

func stateOfEntry(e jetstream.KeyValueEntry) slotState {
	st := slotState{known: true, rev: e.Revision(), observed: now()}
	if e.Operation() != jetstream.KeyValuePut {
		st.free = true
		return st
	}
	st.rec, st.recOK = parseRecord(e.Value())
	return st
}
