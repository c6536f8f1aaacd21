package consumer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/metrics"
)

// Outcome label values of workq_jobs_processed_total. Bounded on purpose.
const (
	outcomeCommitted  = "committed"  // ran, committed and acked
	outcomeRetried    = "retried"    // failed, scheduled again after a backoff
	outcomeDead       = "dead"       // moved to dead letters
	outcomeReassigned = "reassigned" // finished, but another delivery owned the job: refused
	outcomeStale      = "stale"      // not run: a newer delivery had claimed the job
	outcomeCancelled  = "cancelled"  // cancelled: stopped while running, or dropped before it ran
	outcomeFailed     = "failed"     // a server error kept the outcome from being written; redelivered
)

// workerMetrics are a worker's collectors, resolved for its queue once. A Worker
// without the Metrics option gets unregistered collectors: updating them is cheap and
// keeps the code free of nil checks.
type workerMetrics struct {
	inFlight     prometheus.Gauge
	heartbeats   prometheus.Counter
	redeliveries prometheus.Counter
	kinds        *metrics.Kinds[kindMetrics]
}

// kindMetrics are the series of one (queue, kind), resolved when the kind is first
// seen so that counting a job costs no label lookup.
type kindMetrics struct {
	committed, retried, dead, reassigned, stale, cancelled, failed prometheus.Counter
	duration, wait                                                 prometheus.Observer
}

func newMetrics(reg prometheus.Registerer, q string) (*workerMetrics, error) {
	processed, err := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workq_jobs_processed_total",
		Help: "Deliveries handled by workers, by outcome: committed, retried, dead, reassigned (commit refused: another worker owns the job), stale (skipped: a newer delivery claimed it), cancelled (stopped or dropped: the job was cancelled), failed (a server error kept the outcome from being written).",
	}, []string{"queue", "kind", "outcome"}))
	if err != nil {
		return nil, err
	}
	duration, err := metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "workq_job_handler_duration_seconds",
		Help:    "Time one run of a handler took, whatever its outcome.",
		Buckets: metrics.DurationBuckets,
	}, []string{"queue", "kind"}))
	if err != nil {
		return nil, err
	}
	wait, err := metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "workq_job_wait_seconds",
		Help:    "Time from enqueue (the server's timestamp) to the start of the job's first run.",
		Buckets: metrics.DurationBuckets,
	}, []string{"queue", "kind"}))
	if err != nil {
		return nil, err
	}
	inFlight, err := metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "workq_jobs_in_flight",
		Help: "Handlers running now in this process.",
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	heartbeats, err := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workq_heartbeats_total",
		Help: "Progress reports (InProgress) sent for running jobs.",
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	redeliveries, err := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workq_redeliveries_total",
		Help: "Deliveries received with a delivery count above 1 (retries, timeouts, hand-backs).",
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	return &workerMetrics{
		inFlight:     inFlight.WithLabelValues(q),
		heartbeats:   heartbeats.WithLabelValues(q),
		redeliveries: redeliveries.WithLabelValues(q),
		kinds: metrics.NewKinds(func(kind string) *kindMetrics {
			return &kindMetrics{
				committed:  processed.WithLabelValues(q, kind, outcomeCommitted),
				retried:    processed.WithLabelValues(q, kind, outcomeRetried),
				dead:       processed.WithLabelValues(q, kind, outcomeDead),
				reassigned: processed.WithLabelValues(q, kind, outcomeReassigned),
				stale:      processed.WithLabelValues(q, kind, outcomeStale),
				cancelled:  processed.WithLabelValues(q, kind, outcomeCancelled),
				failed:     processed.WithLabelValues(q, kind, outcomeFailed),
				duration:   duration.WithLabelValues(q, kind),
				wait:       wait.WithLabelValues(q, kind),
			}
		}),
	}, nil
}

// observeWait records how long a job waited in the queue before its first run.
// The server's clock stamped it; a skewed local clock is clamped at zero.
func (k *kindMetrics) observeWait(enqueued time.Time, start time.Time) {
	k.wait.Observe(max(0, start.Sub(enqueued).Seconds()))
}

// observeDuration records how long one run of a handler took, with the run's trace id
// as the observation's exemplar when it has one (Tracing): exemplars are exposed
// in the OpenMetrics format only.
func (k *kindMetrics) observeDuration(d time.Duration, traceID string) {
	if traceID != "" {
		if e, ok := k.duration.(prometheus.ExemplarObserver); ok {
			e.ObserveWithExemplar(d.Seconds(), prometheus.Labels{"trace_id": traceID})
			return
		}
	}
	k.duration.Observe(d.Seconds())
}
