package kvlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/retry"
)

// Locker grants named locks and semaphores from one KV bucket and creates rate
// limiters. It is safe for concurrent use; one per process (or per connection) is
// enough, and many Lockers on many connections may share a bucket.
type Locker struct {
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	stream   jetstream.Stream
	cfg      config
	subjPre  string // "$KV.<bucket>."
	host     string
	pid      int
	log      *slog.Logger
	metrics  *lockerMetrics
	freeRevs *revCache

	onGranted func(*Lock) // test hook, set before use
}

// New provisions the lock bucket (a KV bucket with History 1 and limit markers, so
// per-key TTLs work and watchers see expiries) and returns a Locker on it. An
// existing bucket is used as it is if it has limit markers. If the server is not
// reachable yet, New waits for it until ctx ends: clients may start before the server.
func New(ctx context.Context, js jetstream.JetStream, opts ...Option) (*Locker, error) {
	if js == nil {
		return nil, fmt.Errorf("kvlock: new: %w", option.Nil("JetStream"))
	}
	if ctx == nil {
		return nil, fmt.Errorf("kvlock: new: %w", option.Nil("context"))
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("kvlock: new: %w", err)
		}
	}
	m, err := newMetrics(cfg.registerer)
	if err != nil {
		return nil, fmt.Errorf("kvlock: new: register metrics: %w", err)
	}
	l := &Locker{
		js:       js,
		cfg:      cfg,
		subjPre:  "$KV." + cfg.bucket + ".",
		pid:      os.Getpid(),
		log:      cfg.logger.With("bucket", cfg.bucket),
		metrics:  m,
		freeRevs: newRevCache(4096),
	}
	l.host, _ = os.Hostname()
	ctx = retry.WithConn(ctx, js.Conn()) // a request the user may not make fails rather than waits
	// A replicated bucket made while the meta leader counts a node offline (just
	// after it started, or on a loaded machine) waits for it (retry.Placement).
	err = retry.Placement(ctx, func(ctx context.Context) error {
		// Look the bucket up first and create it only when missing: a lock user may
		// be allowed to use the bucket but not to create it (see package perms).
		kv, err := js.KeyValue(ctx, cfg.bucket)
		if err == nil {
			err = checkBucket(ctx, kv)
		} else if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket:         cfg.bucket,
				Description:    "workq locks and semaphores (kvlock)",
				History:        1,
				Replicas:       cfg.replicas,
				Storage:        jetstream.FileStorage,
				LimitMarkerTTL: markerTTL,
			})
			if errors.Is(err, jetstream.ErrBucketExists) {
				kv, err = js.KeyValue(ctx, cfg.bucket)
				if err == nil {
					err = checkBucket(ctx, kv)
				}
			}
		}
		if err != nil {
			return err
		}
		st, err := js.Stream(ctx, "KV_"+cfg.bucket)
		if err != nil {
			return err
		}
		l.kv, l.stream = kv, st
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kvlock: new: provision bucket %q: %w", cfg.bucket, err)
	}
	return l, nil
}

func checkBucket(ctx context.Context, kv jetstream.KeyValue) error {
	st, err := kv.Status(ctx)
	if err != nil {
		return err
	}
	kvs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return nil
	}
	if kvs.LimitMarkerTTL() <= 0 {
		return fmt.Errorf("bucket exists without limit markers (LimitMarkerTTL), so per-key TTLs do not work; "+
			"recreate it or use another bucket: %w", ErrBucketConfig)
	}
	if kvs.History() != 1 {
		return fmt.Errorf("bucket exists with history %d, want 1: %w", kvs.History(), ErrBucketConfig)
	}
	return nil
}

// Bucket is the name of the KV bucket holding the locks.
func (l *Locker) Bucket() string { return l.cfg.bucket }

// revCache remembers, per key, the revision of the last release marker this process
// wrote, so that re-acquiring a recently released name is one compare-and-set round
// trip. A stale entry only costs a fallback read. Bounded: when full it is emptied.
type revCache struct {
	mu  sync.Mutex
	max int
	m   map[string]uint64
}

func newRevCache(max int) *revCache { return &revCache{max: max, m: make(map[string]uint64)} }

func (c *revCache) get(key string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

func (c *revCache) put(key string, rev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[key] = rev
}

func (c *revCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// now is time.Now; every duration this package measures uses the monotonic clock
// reading it carries.
var now = time.Now
