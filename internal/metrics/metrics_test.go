package metrics_test

import (
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/metrics"
)

// The first MaxKinds kinds get label values of their own; later ones share "other".
func TestKindsBounded(t *testing.T) {
	t.Parallel()
	built := map[string]int{}
	var mu sync.Mutex
	k := metrics.NewKinds(func(label string) *string {
		mu.Lock()
		built[label]++
		mu.Unlock()
		return &label
	})
	var wg sync.WaitGroup
	for g := range 4 { // concurrent first sightings build each value once
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range metrics.MaxKinds + 20 {
				kind := "k" + strconv.Itoa((i+g)%(metrics.MaxKinds+20))
				_ = k.Get(kind)
			}
		}()
	}
	wg.Wait()
	if len(built) != metrics.MaxKinds+1 {
		t.Fatalf("built %d label values, want %d + other", len(built), metrics.MaxKinds)
	}
	for label, n := range built {
		if n != 1 {
			t.Errorf("label %q built %d times", label, n)
		}
	}
	others := 0
	for i := range metrics.MaxKinds + 20 {
		if *k.Get("k" + strconv.Itoa(i)) == metrics.OtherKind {
			others++
		}
	}
	if others != 20 {
		t.Errorf("%d kinds counted as other, want 20", others)
	}
}

// Register returns the collector registered first when another registers the same
// metric, so that several producers or workers share a registry.
func TestRegisterReusesExisting(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "workq_test_total", Help: "test"}
	a, err := metrics.Register(reg, prometheus.NewCounterVec(opts, []string{"queue"}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := metrics.Register(reg, prometheus.NewCounterVec(opts, []string{"queue"}))
	if err != nil || a != b {
		t.Fatalf("second registration: %v, same collector %v", err, a == b)
	}
	if _, err := metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workq_test_total", Help: "test"}, []string{"queue"})); err == nil {
		t.Fatal("a gauge registered over a counter of the same name")
	}
	b.WithLabelValues("q").Inc()
	if v, _ := metrics.Value(reg, "workq_test_total", "queue", "q"); v != 1 {
		t.Fatalf("value %v, want 1", v)
	}
	// A nil registerer leaves the collector unregistered and usable.
	c, err := metrics.Register[*prometheus.CounterVec](nil, prometheus.NewCounterVec(opts, []string{"queue"}))
	if err != nil || c == nil {
		t.Fatal(err)
	}
}

// Counting a job of a known kind allocates nothing.
// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestKindsGetDoesNotAllocate(t *testing.T) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workq_alloc_total", Help: "test"}, []string{"kind"})
	k := metrics.NewKinds(func(label string) *prometheus.Counter {
		ctr := c.WithLabelValues(label)
		return &ctr
	})
	k.Get("email")
	if n := testing.AllocsPerRun(1000, func() { (*k.Get("email")).Inc() }); n != 0 {
		t.Errorf("%v allocations per job, want 0", n)
	}
}
