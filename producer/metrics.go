package producer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/metrics"
)

// producerMetrics are a producer's collectors, resolved for its queue once so that counting a
// job is an atomic add. A Producer without the Metrics option gets unregistered
// collectors: updating them is cheap and keeps the code free of nil checks.
type producerMetrics struct {
	enqueued    prometheus.Counter
	duplicates  prometheus.Counter
	errors      prometheus.Counter
	enqueueTime prometheus.Observer
	batchTime   prometheus.Observer
}

func newMetrics(reg prometheus.Registerer, q string) (*producerMetrics, error) {
	enqueued, err := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workq_jobs_enqueued_total",
		Help: "Jobs the server stored (duplicates not included), by Enqueue and EnqueueBatch.",
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	dups, err := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workq_enqueue_duplicates_total",
		Help: "Jobs whose id was enqueued within the duplicate window: nothing new was stored.",
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	errs, err := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workq_enqueue_errors_total",
		Help: "Jobs that could not be enqueued (invalid, too large, server error, context ended).",
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	single, err := metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "workq_enqueue_duration_seconds",
		Help:    "Time one Enqueue took, retries of transient failures included.",
		Buckets: metrics.LatencyBuckets,
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	batch, err := metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "workq_enqueue_batch_duration_seconds",
		Help:    "Time one EnqueueBatch took until every job was confirmed or failed.",
		Buckets: metrics.LatencyBuckets,
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	return &producerMetrics{
		enqueued:    enqueued.WithLabelValues(q),
		duplicates:  dups.WithLabelValues(q),
		errors:      errs.WithLabelValues(q),
		enqueueTime: single.WithLabelValues(q),
		batchTime:   batch.WithLabelValues(q),
	}, nil
}
