package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LimitsKey is the jobs stream's metadata key that holds the queue's limits, as
// JSON: stored with the queue, so every worker obeys the same values.
const LimitsKey = "workq.limits"

// Limits bound how the queue's jobs run across all its workers. The zero value
// limits nothing.
type Limits struct {
	// MaxRunning is how many of the queue's jobs may run at once; 0: no limit.
	MaxRunning int `json:"max_running,omitempty"`
	// MaxRunningByKind bounds the jobs of a kind running at once, beside MaxRunning.
	MaxRunningByKind map[string]int `json:"max_running_by_kind,omitempty"`
	// Rate is how many of the queue's jobs may start per RateWindow; 0: no limit.
	Rate int `json:"rate,omitempty"`
	// RateWindow is the rate's sliding window.
	RateWindow time.Duration `json:"rate_window,omitempty"`
}

// MaxLimit bounds MaxRunning and MaxRunningByKind: each running job holds a slot
// that every waiting worker watches (a kvlock semaphore).
const MaxLimit = 1024

// MinRateWindow is the shortest rate window (kvlock.MinWindow: the server frees aged
// permits at most every 250 ms).
const MinRateWindow = 250 * time.Millisecond

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool {
	return l.MaxRunning == 0 && len(l.MaxRunningByKind) == 0 && l.Rate == 0
}

// Check says what is wrong with l, if anything.
func (l Limits) Check() error {
	if l.MaxRunning < 0 || l.MaxRunning > MaxLimit {
		return fmt.Errorf("max running %d: want 0 (no limit) to %d", l.MaxRunning, MaxLimit)
	}
	for k, n := range l.MaxRunningByKind {
		if n < 1 || n > MaxLimit {
			return fmt.Errorf("max running of kind %q: %d: want 1 to %d", k, n, MaxLimit)
		}
		if len(k) > MaxKindLen {
			return fmt.Errorf("max running of a kind of %d bytes: kinds are at most %d", len(k), MaxKindLen)
		}
	}
	switch {
	case l.Rate < 0:
		return fmt.Errorf("rate %d: want 0 (no limit) or more", l.Rate)
	case l.Rate > 0 && l.RateWindow < MinRateWindow:
		return fmt.Errorf("rate %d per %s: the window must be at least %s", l.Rate, l.RateWindow, MinRateWindow)
	}
	return nil
}

// Equal reports whether l and o are the same limits.
func (l Limits) Equal(o Limits) bool {
	return l.MaxRunning == o.MaxRunning && l.Rate == o.Rate && (l.Rate == 0 || l.RateWindow == o.RateWindow) &&
		maps.Equal(l.MaxRunningByKind, o.MaxRunningByKind)
}

// LimitsOf reads the limits stored in the jobs stream's config. A value workq cannot
// read is an error: the workers would not know what to obey.
func LimitsOf(cfg jetstream.StreamConfig) (Limits, error) {
	v, ok := cfg.Metadata[LimitsKey]
	if !ok || v == "" {
		return Limits{}, nil
	}
	var l Limits
	if err := json.Unmarshal([]byte(v), &l); err != nil {
		return Limits{}, fmt.Errorf("stream %s: metadata %s: %w", cfg.Name, LimitsKey, err)
	}
	if err := l.Check(); err != nil {
		return Limits{}, fmt.Errorf("stream %s: metadata %s: %w", cfg.Name, LimitsKey, err)
	}
	return l, nil
}

// WithLimits returns cfg with limits l stored in its metadata (none when l is zero).
func WithLimits(cfg jetstream.StreamConfig, l Limits) jetstream.StreamConfig {
	md := maps.Clone(cfg.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	if l.IsZero() {
		delete(md, LimitsKey)
	} else {
		b, _ := json.Marshal(l) // plain ints, strings and a duration
		md[LimitsKey] = string(b)
	}
	cfg.Metadata = md
	return cfg
}

// LimitsBucket is the KV bucket of the queue's running-job slots (kvlock
// semaphores): WORKQ_<queue>_LIMITS.
func (n Names) LimitsBucket() string { return "WORKQ_" + n.Queue + "_LIMITS" }

// RateLimiter is the name of the queue's kvlock limiter: "queue-<queue>", or for a
// name too long for a limiter, its first 40 characters and a hash of the whole.
func (n Names) RateLimiter() string {
	name := "queue-" + n.Queue
	if len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(n.Queue))
	return "queue-" + n.Queue[:40] + "-" + hex.EncodeToString(sum[:6])
}
