package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/attempt"
)

// ending is what became of a delivery, as the worker counts it (Stats), measures it
// (workq_jobs_processed_total), logs it and reports it to the test kit (endings).
type ending int

const (
	endCommitted  ending = iota // committed (acked, unfenced)
	endRetrying                 // failed, put back to run again after its delay
	endDead                     // moved to dead letters
	endHandedBack               // given back unfinished by a stopping worker
	endReassigned               // the run's claim was taken by another run: nothing written, not acked
	endCancelled                // the job was cancelled: run stopped, or dropped unrun
	endUnsettled                // a server error kept the outcome from being written: the job comes back
)

// endingSpec is what the worker does for an ending: the Stats counter it adds to,
// the metric (nil: none), the log line (empty: none; %s is the job id) and its level,
// and the outcome the test kit gets.
type endingSpec struct {
	counter func(*counters) *atomic.Uint64
	metric  func(*kindMetrics) prometheus.Counter
	log     string
	level   slog.Level
	report  attempt.Outcome
	outcome string // the outcome its span ends with (Tracer)
}

// endings is the one table of what each ending counts, logs and reports.
var endings = [...]endingSpec{
	endCommitted: {
		counter: func(c *counters) *atomic.Uint64 { return &c.committed },
		metric:  func(m *kindMetrics) prometheus.Counter { return m.committed },
		report:  attempt.Committed,
		outcome: outcomeCommitted,
	},
	endRetrying: {
		counter: func(c *counters) *atomic.Uint64 { return &c.retried },
		metric:  func(m *kindMetrics) prometheus.Counter { return m.retried },
		log:     "job %s failed; it will be retried", level: slog.LevelInfo,
		report: attempt.Retrying, outcome: outcomeRetried,
	},
	endDead: {
		counter: func(c *counters) *atomic.Uint64 { return &c.dead },
		metric:  func(m *kindMetrics) prometheus.Counter { return m.dead },
		log:     "job %s moved to dead letters", level: slog.LevelWarn,
		report: attempt.Dead, outcome: outcomeDead,
	},
	endHandedBack: {
		counter: func(c *counters) *atomic.Uint64 { return &c.handedBack },
		report:  attempt.HandedBack,
		outcome: "handed back",
	},
	endReassigned: {
		counter: func(c *counters) *atomic.Uint64 { return &c.reassigned },
		metric:  func(m *kindMetrics) prometheus.Counter { return m.reassigned },
		log:     "job %s was reassigned", level: slog.LevelWarn,
		report: attempt.Stale, outcome: outcomeReassigned,
	},
	endCancelled: {
		counter: func(c *counters) *atomic.Uint64 { return &c.cancelled },
		metric:  func(m *kindMetrics) prometheus.Counter { return m.cancelled },
		log:     "job %s was cancelled", level: slog.LevelInfo,
		report: attempt.Cancelled, outcome: outcomeCancelled,
	},
	endUnsettled: {
		counter: func(c *counters) *atomic.Uint64 { return &c.errors },
		metric:  func(m *kindMetrics) prometheus.Counter { return m.failed },
		log:     "job %s: outcome not written; the job will be redelivered", level: slog.LevelWarn,
		report: attempt.Unsettled, outcome: outcomeFailed,
	},
}

// ended counts, measures, logs and reports that j's delivery ended as e, with err
// (the handler's error, or why) and, for a retry, the delay; args are more log
// attributes. Every ending of a delivery goes through it, once.
func (w *Worker) ended(j *Job, e ending, err error, delay time.Duration, args ...any) {
	spec := endings[e]
	if j.span != nil {
		if e == endRetrying {
			j.spanEvent("retry scheduled", "delay", delay, "of", j.maxAttempts)
		}
		j.endSpan(spec.outcome, err)
	}
	spec.counter(&w.stats).Add(1)
	if spec.metric != nil {
		spec.metric(j.metrics).Inc()
	}
	if spec.log != "" {
		level := spec.level
		attrs := append([]any{"job", j.id, "attempt", j.attempt}, args...)
		if err != nil {
			attrs = append(attrs, "err", firstLine(err))
		}
		if e == endRetrying {
			attrs = append(attrs, "of", j.maxAttempts, "in", delay.Round(time.Millisecond))
		}
		if p := (*panicError)(nil); errors.As(err, &p) {
			// A panic is a bug in the handler: at error level, with where it happened.
			level = max(level, slog.LevelError)
			attrs = append(attrs, "stack", string(p.stack))
		}
		w.log.Log(context.Background(), level, fmt.Sprintf(spec.log, j.id), attrs...)
	}
	w.report(j, spec.report, err, delay)
}

// settle carries out a fenced run's decision, in the background: the final record by
// compare-and-set on the claim, then the ack, the nak with its delay, or the dead
// letter and the termination (fenced.go, deadletter.go, cancel.go).
func (w *Worker) settle(ctx context.Context, j *Job, d decision) {
	switch d.outcome {
	case lostIt:
		w.lostClaim(j, d.reason, "handler cancelled")
	case commitIt:
		w.commit(ctx, j)
	case giveItBack:
		w.giveBack(j)
	case retryIt:
		w.retry(ctx, j, d.reason, d.delay)
	case deadLetterIt:
		w.deadLetter(ctx, j, d.reason, true)
	}
}
