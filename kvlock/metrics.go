package kvlock

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the package's collectors. A Locker without the Metrics option gets
// unregistered collectors: updating them is cheap and keeps the code free of nil checks.
type metrics struct {
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

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
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
	if reg == nil {
		return m, nil
	}
	var err error
	if m.acquireWait, err = register(reg, m.acquireWait); err != nil {
		return nil, err
	}
	if m.held, err = register(reg, m.held); err != nil {
		return nil, err
	}
	if m.contention, err = register(reg, m.contention); err != nil {
		return nil, err
	}
	if m.lost, err = register(reg, m.lost); err != nil {
		return nil, err
	}
	if m.decisions, err = register(reg, m.decisions); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered under the same
// name so that several Lockers share one registry.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
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
