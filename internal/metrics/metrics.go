// Package metrics holds the Prometheus plumbing shared by workq's packages:
// registering on a caller's registry so that several producers or workers can share
// it, bounding the "kind" label, and the histogram buckets.
package metrics

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxKinds is how many distinct job kinds get a "kind" label value of their own in
// one process, per queue; later kinds share the label value OtherKind. Kinds come
// from job headers, which any publisher sets: the bound keeps a stray producer from
// creating unbounded series.
const MaxKinds = 50

// OtherKind is the "kind" label value of every kind beyond the first MaxKinds.
const OtherKind = "other"

// DurationBuckets suit job handler run times and queue waits: 1 ms to 1 h.
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// LatencyBuckets suit round trips to the server: 0.5 ms to 30 s.
var LatencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Register registers c on reg, or returns the collector already registered with the
// same descriptors, so that several producers, workers or lockers share one
// registry (and its series). A nil reg leaves c unregistered: updating it is cheap
// and keeps callers free of nil checks.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing, nil
			}
		}
		var zero T
		return zero, err
	}
	return c, nil
}

// Kinds resolves a job kind to a value built once per label value (typically the
// kind's pre-labelled counters and histograms), bounding the label values to
// MaxKinds plus OtherKind. Get on a kind seen before is one atomic load and one map
// read, with no lock and no allocation.
type Kinds[T any] struct {
	build func(label string) *T

	mu    sync.Mutex
	seen  atomic.Pointer[map[string]*T] // copy-on-write: readers never lock
	other *T
}

// NewKinds returns a Kinds that builds the value of a label with build.
func NewKinds[T any](build func(label string) *T) *Kinds[T] {
	k := &Kinds[T]{build: build}
	m := map[string]*T{}
	k.seen.Store(&m)
	return k
}

// Get returns kind's value.
func (k *Kinds[T]) Get(kind string) *T {
	if v, ok := (*k.seen.Load())[kind]; ok {
		return v
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	old := *k.seen.Load()
	if v, ok := old[kind]; ok {
		return v
	}
	if len(old) >= MaxKinds {
		// Not remembered: a flood of distinct kinds must not grow the map either.
		if k.other == nil {
			k.other = k.build(OtherKind)
		}
		return k.other
	}
	v := k.build(kind)
	next := make(map[string]*T, len(old)+1)
	for key, val := range old {
		next[key] = val
	}
	next[kind] = v
	k.seen.Store(&next)
	return v
}
