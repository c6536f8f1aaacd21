package kvlock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/testenv"
)

// newTestLocker creates a Locker on js, failing the test on error.
func newTestLocker(t testing.TB, js jetstream.JetStream, opts ...Option) *Locker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := New(ctx, js, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// closedWithin reports whether ch closes within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// release releases lk, failing the test on error.
func release(t testing.TB, lk *Lock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("release %q token %d: %v", lk.Name(), lk.Token(), err)
	}
}

// waitForWatchers waits until the lock bucket has n consumers: waiters that have
// started watching (each Acquire that waits runs one watch).
func waitForWatchers(t testing.TB, l *Locker, n int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%d watching waiters", n), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		info, err := l.stream.Info(ctx)
		return err == nil && info.State.Consumers == n
	})
}

// waitForRenewals waits until the server has stored n renewals of lk's grant,
// counted by revision: n distinct revisions above its token, read through kv, that
// still carry this grant's value. Polling may miss a revision, never invent one, so
// this never returns early.
func waitForRenewals(t testing.TB, kv jetstream.KeyValue, lk *Lock, n int) {
	t.Helper()
	seen := map[uint64]bool{}
	var last string // what the key held at the last look, for the failure message
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 10s waiting for %d renewals of %q (token %d): held %v, lock context ended with %v; the key held %s",
				n, lk.Name(), lk.Token(), lk.Held(), context.Cause(lk.Context()), last)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		e, err := kv.Get(ctx, lk.key)
		cancel()
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("revision %d: %s", e.Revision(), e.Value())
			if r, ok := parseRecord(e.Value()); ok && r.ID == lk.rec.ID && e.Revision() > lk.Token() {
				seen[e.Revision()] = true
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func jsKVConfig(bucket string) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: bucket, History: 1}
}

// gather flattens a registry into name{label values} → value (histograms: _count).
func gather(t testing.TB, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var lv []string
			for _, lp := range m.GetLabel() {
				if lp.GetName() != "kind" || mf.GetName() != "workq_locks_held" && mf.GetName() != "workq_lock_contention_total" {
					lv = append(lv, lp.GetValue())
				}
			}
			name := mf.GetName()
			if len(lv) > 0 {
				name += "{" + strings.Join(lv, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[name] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[strings.Replace(name, "{", "_count{", 1)] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// logBuffer collects JSON log lines from a slog handler; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// records decodes every line logged so far.
func (b *logBuffer) records(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}
