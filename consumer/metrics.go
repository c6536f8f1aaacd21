package consumer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/metrics"
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
	processed      [len(endings)]prometheus.Counter // by ending (settle.go)
	duration, wait prometheus.Observer
}

func newMetrics(reg prometheus.Registerer, q string) (*workerMetrics, error) {
	processed, err := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workq_jobs_processed_total",
		Help: "Deliveries handled by workers, by how they ended: committed, retried, dead, handed_back (a stopping worker gave the job back), reassigned (its outcome was refused: another delivery owns the job), cancelled (stopped or dropped: the job was cancelled), failed (a server error kept the outcome from being written), already_ended (a copy of an enqueue that ended: not run), watched (another run holds the job: put back), busy (another enqueue of the id is live: put back), early (its retry time had not come: put back), unique_dropped (its unique key is held by another job: dropped).",
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
			k := &kindMetrics{duration: duration.WithLabelValues(q, kind), wait: wait.WithLabelValues(q, kind)}
			for e, spec := range endings {
				k.processed[e] = processed.WithLabelValues(q, kind, spec.name)
			}
			return k
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
