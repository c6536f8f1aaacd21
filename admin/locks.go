package admin

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/kvlock"
)

// LockEntry is a held lock or semaphore slot (kvlock's Entry).
type LockEntry = kvlock.Entry

// lockBucketDescription marks the KV buckets kvlock provisions.
const lockBucketDescription = "workq locks and semaphores (kvlock)"

// LockBuckets returns the names of the kvlock buckets on the server, sorted: the
// default WORKQ_LOCKS if it exists, others a Locker was given, and the queues'
// WORKQ_<queue>_LIMITS slots.
func (a *Admin) LockBuckets(ctx context.Context) ([]string, error) {
	if ctx == nil {
		return nil, fmt.Errorf("admin: lock buckets: %w", option.Nil("context"))
	}
	var out []string
	err := a.eachStream(ctx, "$KV.>", func() { out = out[:0] }, func(si *jetstream.StreamInfo) {
		if b, ok := strings.CutPrefix(si.Config.Name, "KV_"); ok && si.Config.Description == lockBucketDescription {
			out = append(out, b)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("admin: list lock buckets: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// Locks returns the locks and semaphore slots held in the kvlock bucket called
// bucket, by name and slot (kvlock's Locker.List). A bucket that does not exist is
// an error wrapping ErrNotFound; Locks never creates one.
func (a *Admin) Locks(ctx context.Context, bucket string) ([]LockEntry, error) {
	if ctx == nil {
		return nil, fmt.Errorf("admin: locks of %q: %w", bucket, option.Nil("context"))
	}
	ok, err := kvlock.BucketExists(ctx, a.js, bucket)
	if err != nil {
		return nil, fmt.Errorf("admin: locks of %q: %w", bucket, err)
	}
	if !ok {
		return nil, fmt.Errorf("admin: lock bucket %q: %w", bucket, ErrNotFound)
	}
	l, err := kvlock.New(ctx, a.js, kvlock.Bucket(bucket))
	if err != nil {
		return nil, err
	}
	return l.List(ctx)
}

// LimiterInfo is a kvlock rate limiter's state.
type LimiterInfo struct {
	Name   string   `json:"name"`   // the limiter's name: queue-<queue> for a queue's Rate limit
	Rate   int      `json:"rate"`   // permits per window
	Window Duration `json:"window"` // the sliding window
	// Used is how many permits were granted within the last window (and not yet
	// aged out, which the server does at most every 250 ms).
	Used int `json:"used"`
	// Last is when the newest permit was granted; zero if none is in the window.
	Last time.Time `json:"last,omitzero"`
}

// Limiters returns the kvlock rate limiters on the server, by name.
func (a *Admin) Limiters(ctx context.Context) ([]LimiterInfo, error) {
	if ctx == nil {
		return nil, fmt.Errorf("admin: limiters: %w", option.Nil("context"))
	}
	var out []LimiterInfo
	err := a.eachStream(ctx, "workq.limit.*", func() { out = out[:0] }, func(si *jetstream.StreamInfo) {
		name, ok := strings.CutPrefix(si.Config.Name, "WORKQ_LIMIT_")
		if !ok {
			return
		}
		li := LimiterInfo{Name: name, Rate: int(si.Config.MaxMsgsPerSubject), Window: Duration(si.Config.MaxAge), Used: int(si.State.Msgs)}
		if si.State.Msgs > 0 {
			li.Last = si.State.LastTime
		}
		out = append(out, li)
	})
	if err != nil {
		return nil, fmt.Errorf("admin: list limiters: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
