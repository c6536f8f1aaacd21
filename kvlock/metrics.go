package kvlock

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/metrics"
)

// lockerMetrics are the package's collectors. A Locker without the Metrics option
// gets unregistered collectors (metrics.Register with a nil registry): updating them
// is cheap and keeps the code free of nil checks.
type lockerMetrics struct {
	acquireWait *prometheus.HistogramVec // kind
	held        *prometheus.GaugeVec     // kind
	contention  *prometheus.CounterVec   // kind
	lost        *prometheus.CounterVec   // kind, reason
	decisions   *prometheus.CounterVec   // result
}

// Label values. Bounded on purpose: never a lock name.
const (
	kindLock      = "lock"
	kindSemaphore = "semaphore"

	reasonExpired   = "expired"    // could not renew within the lease
	reasonTakenOver = "taken_over" // another holder's write replaced ours

	resultAllowed  = "allowed"
	resultRejected = "rejected"
)

func newMetrics(reg prometheus.Registerer) (*lockerMetrics, error) {
	m := &lockerMetrics{
		acquireWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "workq_lock_acquire_wait_seconds",
			Help:    "Time Acquire waited until a lock or semaphore slot was granted.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"kind"}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workq_locks_held",
			Help: "Locks and semaphore slots currently held by this process.",
		}, []string{"kind"}),
		contention: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workq_lock_contention_total",
			Help: "Acquire and TryAcquire calls that found the lock or semaphore held by others.",
		}, []string{"kind"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workq_locks_lost_total",
			Help: "Locks lost before release: lease expired before renewal, or taken over.",
		}, []string{"kind", "reason"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workq_limiter_decisions_total",
			Help: "Rate limiter decisions.",
		}, []string{"result"}),
	}
	var err error
	if m.acquireWait, err = metrics.Register(reg, m.acquireWait); err != nil {
		return nil, err
	}
	if m.held, err = metrics.Register(reg, m.held); err != nil {
		return nil, err
	}
	if m.contention, err = metrics.Register(reg, m.contention); err != nil {
		return nil, err
	}
	if m.lost, err = metrics.Register(reg, m.lost); err != nil {
		return nil, err
	}
	if m.decisions, err = metrics.Register(reg, m.decisions); err != nil {
		return nil, err
	}
	return m, nil
}
