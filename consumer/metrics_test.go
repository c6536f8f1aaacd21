package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/metrics"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// value reads one metric from reg: the sum of its series matching labels (pairs).
func value(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	v, err := metrics.Value(reg, name, labels...)
	if err != nil {
		t.Fatalf("gather %s: %v", name, err)
	}
	return v
}

// After a run with commits, a retry, a dead letter and a reassignment (a stalled
// worker whose commit is refused), the producer's and the workers' metrics say so,
// by queue, kind and outcome. Every producer and worker shares one registry. The
// stalled worker has a queue of its own: its pending pull request would otherwise
// take other jobs into the stall.
func TestMetricsAfterRun(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	jsA, px := proxiedJS(t, env)
	const q, qs = "metrics", "metrics-stall"
	reg := prometheus.NewRegistry()
	p := newProducer(t, js, q, producer.Metrics(reg))
	ps := newProducer(t, js, qs, producer.Metrics(reg))
	opts := []consumer.Option{consumer.AckWait(time.Second), consumer.Concurrency(1), consumer.Metrics(reg),
		consumer.Backoff(consumer.Constant(10 * time.Millisecond))}

	// A runs the slow job and stalls; S gets it after AckWait and commits it.
	aStarted, aRelease := make(chan struct{}, 1), make(chan struct{})
	logsA, logsB := &logRecorder{}, &logRecorder{}
	wA, err := consumer.New(testenv.Context(t, 10*time.Second), jsA, qs, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		select {
		case aStarted <- struct{}{}:
		default:
		}
		<-aRelease
		return nil
	}), append(opts, consumer.Name("A"), consumer.Logger(slog.New(logsA)))...)
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, wA)
	if _, err := ps.Enqueue(testenv.Context(t, 5*time.Second), []byte("x"), producer.ID("slow-1"), producer.Kind("slow")); err != nil {
		t.Fatal(err)
	}
	<-aStarted
	testenv.Eventually(t, 5*time.Second, "A's first heartbeat", func() bool { return value(t, reg, "workq_heartbeats_total", "queue", qs) >= 1 })
	if v := value(t, reg, "workq_jobs_in_flight", "queue", qs); v != 1 {
		t.Errorf("in flight while A runs: %v, want 1", v)
	}
	px.Pause()
	wS, err := consumer.New(testenv.Context(t, 10*time.Second), js, qs, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		return nil
	}), append(opts, consumer.Name("S"), consumer.Logger(quiet))...)
	if err != nil {
		t.Fatalf("second worker on the same registry: %v", err)
	}
	runWorker(t, wS)

	// B runs the other queue: commits, a retry, a dead letter.
	wB, err := consumer.New(testenv.Context(t, 10*time.Second), js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		switch {
		case j.ID() == "retry-1" && j.Attempt() == 1:
			return errors.New("not yet")
		case j.ID() == "dead-1":
			return consumer.Permanent(errors.New("never"))
		}
		return nil
	}), append(opts, consumer.Name("B"), consumer.Logger(slog.New(logsB)))...)
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, wB)
	jobs := []producer.Job{{ID: "ok-1", Kind: "email"}, {ID: "ok-2", Kind: "email"}, {ID: "retry-1", Kind: "email"}, {ID: "dead-1", Kind: "email"}}
	if _, err := p.EnqueueBatch(testenv.Context(t, 10*time.Second), jobs); err != nil {
		t.Fatal(err)
	}
	if info, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID("ok-1")); err != nil || !info.Duplicate {
		t.Fatalf("re-enqueue of ok-1: %+v, %v; want a duplicate", info, err)
	}
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID("bad\nid")); err == nil {
		t.Fatal("an invalid id was enqueued")
	}
	// Wait on the metrics themselves: a worker counts in Stats a moment before.
	testenv.Eventually(t, 15*time.Second, "B to finish every job", func() bool {
		return value(t, reg, "workq_jobs_processed_total", "queue", q, "outcome", "committed") == 3 &&
			value(t, reg, "workq_jobs_processed_total", "queue", q, "outcome", "dead") == 1
	})
	testenv.Eventually(t, 15*time.Second, "S to commit the stalled job", func() bool {
		return value(t, reg, "workq_jobs_processed_total", "queue", qs, "outcome", "committed") == 1
	})

	close(aRelease)
	px.Resume()
	testenv.Eventually(t, 10*time.Second, "A's commit to be refused", func() bool {
		return value(t, reg, "workq_jobs_processed_total", "queue", qs, "outcome", "reassigned") == 1
	})

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"workq_jobs_enqueued_total", []string{"queue", q}, 4},
		{"workq_jobs_enqueued_total", []string{"queue", qs}, 1},
		{"workq_enqueue_duplicates_total", []string{"queue", q}, 1},
		{"workq_enqueue_errors_total", []string{"queue", q}, 1},
		{"workq_enqueue_duration_seconds", []string{"queue", q}, 1}, // a histogram: its count
		{"workq_enqueue_batch_duration_seconds", []string{"queue", q}, 1},
		{"workq_jobs_processed_total", []string{"queue", q, "kind", "email", "outcome", "committed"}, 3},
		{"workq_jobs_processed_total", []string{"queue", q, "kind", "email", "outcome", "retried"}, 1},
		{"workq_jobs_processed_total", []string{"queue", q, "kind", "email", "outcome", "dead"}, 1},
		{"workq_jobs_processed_total", []string{"queue", q, "outcome", "reassigned"}, 0},
		{"workq_jobs_processed_total", []string{"queue", qs, "kind", "slow", "outcome", "committed"}, 1},
		{"workq_jobs_processed_total", []string{"queue", qs, "kind", "slow", "outcome", "reassigned"}, 1},
		{"workq_jobs_processed_total", []string{"outcome", "failed"}, 0},
		{"workq_job_handler_duration_seconds", []string{"queue", q, "kind", "email"}, 5}, // ok ×2, retry ×2, dead
		{"workq_job_handler_duration_seconds", []string{"queue", qs, "kind", "slow"}, 2}, // A's run and S's
		{"workq_job_wait_seconds", []string{"queue", q, "kind", "email"}, 4},             // first deliveries only
		{"workq_job_wait_seconds", []string{"queue", qs, "kind", "slow"}, 1},
		{"workq_jobs_in_flight", nil, 0},
	} {
		if got := value(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := value(t, reg, "workq_redeliveries_total", "queue", q); got < 1 {
		t.Errorf("workq_redeliveries_total{queue=%s} = %v, want ≥ 1 (the retry)", q, got)
	}
	if got := value(t, reg, "workq_redeliveries_total", "queue", qs); got < 1 {
		t.Errorf("workq_redeliveries_total{queue=%s} = %v, want ≥ 1 (the stalled job)", qs, got)
	}
	// The metrics agree with the workers' own counters.
	sa, sb, ss := wA.Stats(), wB.Stats(), wS.Stats()
	if got := value(t, reg, "workq_redeliveries_total"); got != float64(sa.Redelivered+sb.Redelivered+ss.Redelivered) {
		t.Errorf("redeliveries %v, Stats say %d", got, sa.Redelivered+sb.Redelivered+ss.Redelivered)
	}
	if got := value(t, reg, "workq_heartbeats_total"); got != float64(sa.Heartbeats+sb.Heartbeats+ss.Heartbeats) {
		t.Errorf("heartbeats %v, Stats say %d", got, sa.Heartbeats+sb.Heartbeats+ss.Heartbeats)
	}

	// One log line per notable event, naming the job; nothing per successful job.
	// (The line follows the count by a moment.)
	testenv.Eventually(t, 5*time.Second, "A to log the reassignment", func() bool { return logsA.has("job slow-1 was reassigned") })
	testenv.Eventually(t, 5*time.Second, "B to log the dead letter", func() bool { return logsB.has("job dead-1 moved to dead letters") })
	logsB.mu.Lock()
	for _, m := range logsB.msgs {
		// retry-1's failed first attempt is logged (info), its commit not.
		if strings.Contains(m, "ok-") || strings.Contains(m, "retry-1") && m != "job retry-1 failed; it will be retried" {
			t.Errorf("B logged a successful job: %q", m)
		}
	}
	logsB.mu.Unlock()
}

// Workers and producers of two queues in one process share a registry: each New
// succeeds and the series are per queue.
func TestMetricsSharedRegistry(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	reg := prometheus.NewRegistry()
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error { return nil })
	for _, q := range []string{"shared-a", "shared-b"} {
		p := newProducer(t, js, q, producer.Metrics(reg))
		newProducer(t, js, q, producer.Metrics(reg)) // a second producer of the queue
		for range 2 {
			runWorker(t, newWorker(t, js, q, h, consumer.Metrics(reg), consumer.Concurrency(2)))
		}
		enqueueN(t, p, 10, q)
	}
	for _, q := range []string{"shared-a", "shared-b"} {
		testenv.Eventually(t, 10*time.Second, q+"'s jobs committed", func() bool {
			return value(t, reg, "workq_jobs_processed_total", "queue", q, "outcome", "committed") == 10
		})
		if got := value(t, reg, "workq_jobs_enqueued_total", "queue", q); got != 10 {
			t.Errorf("%s: enqueued %v, want 10", q, got)
		}
	}
	if got := value(t, reg, "workq_jobs_processed_total", "kind", "", "outcome", "committed"); got != 20 {
		t.Errorf("committed jobs without a kind: %v, want 20", got)
	}
}
