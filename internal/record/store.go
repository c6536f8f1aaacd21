package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/groupcommit"
	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/wireid"
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
//
// Reads are linearizable when Linearizable is set: they go to the bucket's stream
// leader. KV's own Get uses direct gets, which any replica may answer, and a replica
// that lags (one restarting after a crash) serves an older record: a claim or a fence
// that decides on it could let a superseded run pass. On a single replica the two are
// the same, and the direct get is cheaper.
//
// Every read and write waits while the bucket has no leader (retry.Do,
// retry.UntilLeader), up to ctx's end.
//
// Writes go through Group when it is set: the writes of many concurrent jobs then
// share atomic batches (see package groupcommit), with fencing unchanged.
type Store struct {
	JS           jetstream.JetStream
	KV           jetstream.KeyValue
	Bucket       string
	Linearizable bool
	Group        *groupcommit.Writer
}

// NewStore returns the store of bucket, with linearizable reads when the bucket has
// more than one replica (replicaReads turns them off: any replica may answer).
func NewStore(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, bucket string, replicaReads bool) (Store, error) {
	st, err := kv.Status(ctx)
	if err != nil {
		return Store{}, fmt.Errorf("job records %s: %w", bucket, err)
	}
	replicas := 1
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		replicas = bs.StreamInfo().Config.Replicas
	}
	return Store{JS: js, KV: kv, Bucket: bucket, Linearizable: replicas > 1 && !replicaReads}, nil
}

// Get reads the record of id with its revision. A value at the key that is not id's
// record (see Decode) is a *CorruptError, which matches ErrCorrupt.
func (s Store) Get(ctx context.Context, id string) (r *Record, err error) {
	err = retry.Do(ctx, func(ctx context.Context) error { r, err = s.get(ctx, id); return err })
	return r, err
}

// get is one try of Get.
func (s Store) get(ctx context.Context, id string) (*Record, error) {
	var value []byte
	var rev uint64
	var at time.Time
	if s.Linearizable {
		m, err := s.leaderGet(ctx, id)
		if err != nil {
			return nil, err
		}
		value, rev, at = m.Data, m.Sequence, m.Time
	} else {
		e, err := s.KV.Get(ctx, wireid.Encode(id))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		value, rev, at = e.Value(), e.Revision(), e.Created()
	}
	r, err := Decode(id, value, rev)
	if err != nil {
		return nil, err
	}
	r.WrittenAt = at
	return r, nil
}

// Now reads the clock of the server that leads the bucket's stream: the clock its
// records' write times (WrittenAt) come from, so that a lease is judged on one
// server's clock, never a worker's. One stream info request.
func (s Store) Now(ctx context.Context) (now time.Time, err error) {
	err = retry.Do(ctx, func(ctx context.Context) error {
		st, err := s.JS.Stream(ctx, "KV_"+s.Bucket)
		if err != nil {
			return err
		}
		now = st.CachedInfo().TimeStamp
		if now.IsZero() {
			return fmt.Errorf("job records %s: the server's stream info carries no time", s.Bucket)
		}
		return nil
	})
	return now, err
}

// storedMsg is a message as the stream's message-get API returns it.
type storedMsg struct {
	Subject  string    `json:"subject"`
	Sequence uint64    `json:"seq"`
	Header   []byte    `json:"hdrs,omitempty"`
	Data     []byte    `json:"data,omitempty"`
	Time     time.Time `json:"time"`
}

// leaderGet reads the key's last message through the stream's message-get API,
// which the stream leader answers (not a direct get, which any replica may). A
// delete, purge or expiry marker is ErrNotFound.
func (s Store) leaderGet(ctx context.Context, id string) (*storedMsg, error) {
	m, err := s.lastMsg(ctx, id)
	if err != nil {
		return nil, err
	}
	if isMarker(m) {
		return nil, ErrNotFound
	}
	return m, nil
}

// isMarker reports whether m is a delete, purge or expiry marker.
func isMarker(m *storedMsg) bool {
	if len(m.Header) == 0 {
		return false
	}
	h, err := nats.DecodeHeadersMsg(m.Header)
	return err == nil && isMarkerHeader(h)
}

// lastMsg reads the key's last message, a marker too, from the stream leader.
func (s Store) lastMsg(ctx context.Context, id string) (*storedMsg, error) {
	return s.lastKeyMsg(ctx, wireid.Encode(id), id)
}

// lastKeyMsg reads raw key's last message, a marker too, from the stream leader; id
// names it in errors.
func (s Store) lastKeyMsg(ctx context.Context, key, id string) (*storedMsg, error) {
	req, err := json.Marshal(map[string]string{"last_by_subj": "$KV." + s.Bucket + "." + key})
	if err != nil {
		return nil, err
	}
	reply, err := s.JS.Conn().RequestWithContext(ctx, apiPrefix(s.JS)+"STREAM.MSG.GET.KV_"+s.Bucket, req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error,omitempty"`
		Message *storedMsg          `json:"message,omitempty"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("job record %s: message get: %w", id, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == 10037: // no message found
		return nil, ErrNotFound
	case resp.Error != nil:
		return nil, fmt.Errorf("job record %s: message get: %w", id, resp.Error)
	case resp.Message == nil:
		return nil, fmt.Errorf("job record %s: message get: empty response", id)
	}
	return resp.Message, nil
}

// apiPrefix is the JetStream API prefix js sends its requests to.
func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return jetstream.DefaultAPIPrefix
}

// Create writes r if id has no live record; r.Revision is set to the new revision. It
// fails with ErrConflict otherwise.
func (s Store) Create(ctx context.Context, r *Record) error {
	err := s.write(ctx, r, expectRevision(0))
	if !errors.Is(err, ErrConflict) {
		return err
	}
	// The key has history: a live record, or a delete, purge or expiry marker, which
	// a create writes over (as KV's own Create does), by compare-and-set on it.
	rev, err := s.markerRevision(ctx, r.ID)
	if err != nil {
		return err
	}
	return s.write(ctx, r, expectRevision(rev))
}

// markerRevision is the revision of the delete, purge or expiry marker at id's key
// (0: the key has no message), for a create to write over; ErrConflict if a value is
// there. A live value is read raw (KV's direct get), not through the message-get
// API: a foreign value may be as large as a message, and that API sends it as base64
// in JSON. Only a marker, which is small, is read there for its revision.
func (s Store) markerRevision(ctx context.Context, id string) (uint64, error) {
	_, err := s.KV.Get(ctx, wireid.Encode(id))
	switch {
	case err == nil:
		return 0, fmt.Errorf("%w: %s: a value is there", ErrConflict, id)
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, err
	}
	m, err := s.lastMsg(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return 0, nil // no message at all: the marker went meanwhile
	case err != nil:
		return 0, err
	case !isMarker(m):
		return 0, fmt.Errorf("%w: %s: a value is there", ErrConflict, id)
	}
	return m.Sequence, nil
}

// Update writes r if the record is still at revision prev; r.Revision is set to the
// new revision. It fails with ErrConflict otherwise.
func (s Store) Update(ctx context.Context, r *Record, prev uint64) error {
	return s.write(ctx, r, expectRevision(prev))
}

// Remove removes id's record, with its history.
func (s Store) Remove(ctx context.Context, id string) error {
	return retry.Do(ctx, func(ctx context.Context) error { return s.KV.Purge(ctx, wireid.Encode(id)) })
}

// Put writes r whatever is there (the unfenced path).
func (s Store) Put(ctx context.Context, r *Record) error {
	return s.write(ctx, r, nil)
}

// expectRevision is the header that makes a write a compare-and-set on the key's
// revision (0: the key has no live record).
func expectRevision(rev uint64) nats.Header {
	return nats.Header{jetstream.ExpectedLastSubjSeqHeader: []string{strconv.FormatUint(rev, 10)}}
}

func (s Store) write(ctx context.Context, r *Record, h nats.Header) error {
	msg, err := s.msg(r, h)
	if err != nil {
		return err
	}
	return retry.UntilLeader(ctx, func() error { return s.publish(ctx, r, msg) })
}

// CreateMsg is the message that creates r where id has no live record, over the
// key's delete, purge or expiry marker if it has one (as Create writes), for a
// caller that sends it in an atomic batch. ErrConflict if a record is there.
func (s Store) CreateMsg(ctx context.Context, r *Record) (*nats.Msg, error) {
	rev, err := s.markerRevision(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	return s.WriteMsg(r, rev)
}

// WriteMsg is the message that writes r over revision prev by compare-and-set
// (prev 0: the key has no record), for a caller that sends it in an atomic batch
// with other writes.
func (s Store) WriteMsg(r *Record, prev uint64) (*nats.Msg, error) {
	return s.msg(r, expectRevision(prev))
}

// msg is the message that writes r with headers h.
func (s Store) msg(r *Record, h nats.Header) (*nats.Msg, error) {
	b, err := r.AppendJSON(nil) // json.Marshal's bytes, cheaper (encode.go)
	if err != nil {
		return nil, err
	}
	if (r.Workflow != "" || r.SequenceKey != "") && !r.State.Terminal() {
		// A workflow's task, or a sequence's job, may wait for its parents, or in the
		// queue once released, longer than the bucket keeps records: its record says
		// whom it releases, so it never expires before the job ends (the write that
		// ends it is on the bucket's TTL again).
		if h == nil {
			h = nats.Header{}
		}
		h.Set(jetstream.MsgTTLHeader, "never")
	}
	return &nats.Msg{Subject: "$KV." + s.Bucket + "." + wireid.Encode(r.ID), Data: b, Header: h}, nil
}

// publish sends one write of r and waits for its acknowledgement.
func (s Store) publish(ctx context.Context, r *Record, msg *nats.Msg) (err error) {
	var ack *jetstream.PubAck
	if s.Group != nil {
		ack, err = s.Group.PublishMsg(ctx, msg)
		return s.written(r, ack, err)
	}
	f, err := s.JS.PublishMsgAsync(msg)
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
		ack, err = s.JS.PublishMsg(ctx, msg)
	}
	return s.written(r, ack, err)
}

// written sets r's revision from a write's acknowledgement, or classifies its error.
func (s Store) written(r *Record, ack *jetstream.PubAck, err error) error {
	if jserr.IsConflict(err) {
		return fmt.Errorf("%w: %s: %w", ErrConflict, r.ID, err)
	}
	if err != nil {
		return err
	}
	r.Revision = ack.Sequence
	return nil
}
