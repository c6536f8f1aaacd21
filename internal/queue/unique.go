package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/naming"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/wireid"
)

// Headers of a unique job (producer.Unique). A worker that finds HeaderUnique on a
// job runs it only while the job holds the key in the queue's unique bucket, and
// releases the key when the job ends.
const (
	// HeaderUnique carries the job's unique key.
	HeaderUnique = "Workq-Unique"
	// HeaderUniqueFor is how long, in whole seconds, the key stays held after the job
	// ended; absent or 0: it is released at once.
	HeaderUniqueFor = "Workq-Unique-For"
)

// ErrNoUnique means the queue cannot keep unique keys: the server refused the
// bucket (per-key TTLs need nats-server 2.11 or later).
var ErrNoUnique = errors.New("queue cannot keep unique keys")

// CheckUniqueKey checks a unique key by the rules of a job id (CheckID): it is a KV
// key in the unique bucket, readable by operators as it was given.
func CheckUniqueKey(key string) error {
	if err := wireid.Check("unique key", key); err != nil {
		return fmt.Errorf("%w: %w", naming.ErrInvalid, err)
	}
	return nil
}

// UniqueFor is the keep period that header h carries (HeaderUniqueFor), 0 if none or
// not a whole number of seconds.
func UniqueFor(h nats.Header) time.Duration {
	s := h.Get(HeaderUniqueFor)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > int64(MaxKeep/time.Second) {
		return 0
	}
	return time.Duration(n) * time.Second
}

// KeepSeconds is keep rounded up to whole seconds, the unit of HeaderUniqueFor and
// of the server's per-key TTL.
func KeepSeconds(keep time.Duration) int64 {
	return int64((keep + time.Second - 1) / time.Second)
}

// MaxKeep bounds a keep period: far beyond any use, short of overflowing a
// time.Duration.
const MaxKeep = 100 * 365 * 24 * time.Hour

// Reservation is the value of a unique key: which job holds it. It is the JSON
// document docs/wire-format.md describes.
type Reservation struct {
	// Job is the id of the job that holds the key.
	Job string `json:"job"`
	// At is when this value was written, on the writer's clock (for people: the
	// decisions use the server's time of the write).
	At time.Time `json:"at"`
	// Keep is how long, in seconds, the key stays held after the job ended.
	Keep int64 `json:"keep,omitempty"`
	// FinishedAt is when the job ended, written by the worker that ended it: the key
	// is free Keep seconds after it.
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Takeover is the id of a job whose producer found Job neither queued,
	// scheduled, recorded nor recent, and checks again before it takes the key. A
	// worker about to run Job clears it, which makes that takeover fail.
	Takeover string `json:"takeover,omitempty"`
}

// KeepDuration is r's keep period.
func (r *Reservation) KeepDuration() time.Duration { return time.Duration(r.Keep) * time.Second }

// UniqueEntry is a reservation as read: the value, its revision and the server's
// time of its write.
type UniqueEntry struct {
	Reservation
	Revision uint64
	Written  time.Time
}

// Uniques reads and writes the reservations of one queue's unique bucket. Its reads
// go to the bucket's stream leader (the bucket has no direct gets), so a decision
// never rests on a replica that lags; its writes are compare-and-sets. Every call
// waits while the bucket has no leader, up to ctx's end, and each try gets a bounded
// wait for its reply (retry.Do): a write sent to a node that failed, or as a leader
// was elected, may get no reply at all, and waited for the whole context (a unique
// enqueue during a failover once did). Sending a compare-and-set again is safe: if
// the first one landed, the second is a conflict, which callers resolve by reading
// the key (a reservation that names the job is its own).
type Uniques struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	bucket string
}

// markerTTL is how long the bucket keeps the marker of a key removed by its TTL or a
// release: long enough for a watcher to see it, short enough that released keys do
// not pile up.
const markerTTL = time.Second

// OpenUniques returns the unique bucket of queue o, creating it if it is missing,
// with the replicas and storage of the queue's stream. It waits while the server is
// unreachable, up to ctx's end.
func OpenUniques(ctx context.Context, js jetstream.JetStream, o *Objects) (*Uniques, error) {
	n := o.Names
	jobs := o.Stream.CachedInfo().Config
	ctx = retry.WithConn(ctx, js.Conn())
	var kv jetstream.KeyValue
	err := retry.Placement(ctx, func(ctx context.Context) error {
		var err error
		kv, err = js.KeyValue(ctx, n.UniqueBucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket:         n.UniqueBucket,
				Description:    "workq unique keys of queue " + n.Queue,
				History:        1,
				Storage:        jobs.Storage,
				Replicas:       jobs.Replicas,
				LimitMarkerTTL: markerTTL,
			})
			if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				kv, err = js.KeyValue(ctx, n.UniqueBucket)
			}
		}
		if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
			return fmt.Errorf("%w: bucket %s: per-key TTLs need nats-server 2.11 or later: %w", ErrNoUnique, n.UniqueBucket, err)
		}
		if err != nil {
			return err
		}
		kv, err = noDirectGets(ctx, js, kv)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("queue %s: unique bucket %s: %w", n.Queue, n.UniqueBucket, notProvisioned(err))
	}
	return &Uniques{js: js, kv: kv, bucket: n.UniqueBucket}, nil
}

// noDirectGets turns direct gets off on kv's stream if they are on, and returns the
// bucket bound again: its gets then go to the stream leader. A direct get may be
// answered by any replica, and one that lags would show a key free or held by a job
// that lost it (see the engine facts on linearizable reads).
func noDirectGets(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue) (jetstream.KeyValue, error) {
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return nil, fmt.Errorf("unexpected status type %T", st)
	}
	cfg := bs.StreamInfo().Config
	if !cfg.AllowDirect {
		return kv, nil
	}
	if !cfg.AllowMsgTTL {
		return nil, fmt.Errorf("%w: stream %s exists without per-key TTLs", ErrIncompatible, cfg.Name)
	}
	cfg.AllowDirect = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return nil, fmt.Errorf("turning off direct gets on stream %s: %w", cfg.Name, err)
	}
	return js.KeyValue(ctx, kv.Bucket())
}

// Get reads key's reservation; found is false when the key is free (never held,
// released or expired).
func (u *Uniques) Get(ctx context.Context, key string) (e UniqueEntry, found bool, err error) {
	var kve jetstream.KeyValueEntry
	err = retry.Do(ctx, func(ctx context.Context) (err error) { kve, err = u.kv.Get(ctx, wireid.Encode(key)); return err })
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return UniqueEntry{}, false, nil
	}
	if err != nil {
		return UniqueEntry{}, false, fmt.Errorf("unique key %s: %w", key, err)
	}
	e.Revision, e.Written = kve.Revision(), kve.Created()
	if err := json.Unmarshal(kve.Value(), &e.Reservation); err != nil {
		return UniqueEntry{}, false, fmt.Errorf("unique key %s at revision %d: %w", key, e.Revision, err)
	}
	return e, true, nil
}

// Create reserves key for r if it is free and returns the revision written. A key
// held already is a conflict (jserr.IsConflict).
func (u *Uniques) Create(ctx context.Context, key string, r Reservation) (uint64, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	// First as a write expecting no message at the key: KeyValue.Create reads the
	// key after any failed write, a read that a bucket without a leader leaves
	// unanswered until ctx ends. Then, over a delete or expiry marker, as KV's Create.
	var rev uint64
	tok := wireid.Encode(key)
	err = retry.Do(ctx, func(ctx context.Context) (err error) { rev, err = u.kv.Update(ctx, tok, b, 0); return err })
	if jserr.IsConflict(err) {
		err = retry.Do(ctx, func(ctx context.Context) (err error) { rev, err = u.kv.Create(ctx, tok, b); return err })
	}
	return rev, err
}

// Update writes r over revision rev of key and returns the new revision; a key
// written since is a conflict. The value has no TTL.
func (u *Uniques) Update(ctx context.Context, key string, r Reservation, rev uint64) (uint64, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	var next uint64
	err = retry.Do(ctx, func(ctx context.Context) (err error) {
		next, err = u.kv.Update(ctx, wireid.Encode(key), b, rev)
		return err
	})
	return next, err
}

// Finish writes r, whose job ended, over revision rev of key, to expire after keep
// (whole seconds, at least 1): KeyValue.Update would drop the TTL, so the value is
// published with the expected revision and a message TTL.
func (u *Uniques) Finish(ctx context.Context, key string, r Reservation, rev uint64, keep time.Duration) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	ttl := time.Duration(max(KeepSeconds(keep), 1)) * time.Second
	msg := &nats.Msg{Subject: "$KV." + u.bucket + "." + wireid.Encode(key), Data: b}
	return retry.Do(ctx, func(ctx context.Context) error {
		_, err := u.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
		return err
	})
}

// Release frees key if it is still at revision rev, leaving a marker that the
// server removes after markerTTL.
func (u *Uniques) Release(ctx context.Context, key string, rev uint64) error {
	return retry.Do(ctx, func(ctx context.Context) error {
		return u.kv.Purge(ctx, wireid.Encode(key), jetstream.LastRevision(rev), jetstream.PurgeTTL(markerTTL))
	})
}

// LazyUniques opens a queue's unique bucket when it is first needed, so a queue
// without unique jobs never has one, and keeps it once open.
type LazyUniques struct {
	mu sync.Mutex
	u  *Uniques
}

// Open returns the bucket, opening (and creating) it on the first call that
// succeeds.
func (l *LazyUniques) Open(ctx context.Context, js jetstream.JetStream, o *Objects) (*Uniques, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.u != nil {
		return l.u, nil
	}
	u, err := OpenUniques(ctx, js, o)
	if err != nil {
		return nil, err
	}
	l.u = u
	return u, nil
}
