package consumer

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/option"
)

// Tracer traces the deliveries a worker handles (Tracing): a span per delivery, from
// its arrival to its outcome, with its claim and the steps of its settle as events.
// Package otelworkq implements it with OpenTelemetry, so that this package, and a
// program that does not trace, compile none of it. Without a Tracer (the default)
// the worker calls nothing and allocates nothing for tracing.
type Tracer interface {
	// StartDelivery begins delivery d's span. ctx is the worker's; the context
	// returned is the delivery's, from which the handler's context derives, so a span
	// it carries is the parent of the handler's own spans.
	StartDelivery(ctx context.Context, d Delivery) (context.Context, DeliverySpan)
}

// Delivery is what a Tracer learns of a delivery as it arrives.
type Delivery struct {
	Queue  string
	Worker string // the worker's name
	JobID  string
	Kind   string
	// Header is the job message's headers (read them; do not change them): the trace
	// context its producer carried, if any.
	Header nats.Header
	// Schedule names the periodic schedule that fired the job, "" for a job that
	// was enqueued: each firing is a run of its own, linked to the schedule's trace.
	Schedule string
	// Delivered counts the server's deliveries of the message, this one included.
	Delivered uint64
	// EnqueuedAt is when the job was enqueued (a delayed job: not when it fired).
	EnqueuedAt time.Time
}

// DeliverySpan is one delivery's span. The worker calls its methods from the
// delivery's goroutine and, for the settle, from the goroutine that settles it, one
// call at a time, and End exactly once.
type DeliverySpan interface {
	// Claimed says that the delivery claimed its job for attempt; token is the
	// claim's fencing token (0 unfenced).
	Claimed(attempt int, token uint64)
	// Event records a step of the delivery: "commit", "retry scheduled", "dead
	// letter"; kv are attribute pairs, as log/slog takes them.
	Event(name string, kv ...any)
	// End ends the span with the delivery's outcome, as workq_jobs_processed_total
	// names it (committed, retried, dead, handed_back, reassigned, cancelled, failed,
	// already_ended, watched, busy, early, unique_dropped; docs/metrics.md), or "not
	// run" (handed back by a stopping worker before its claim), and the error, if any
	// (the handler's, or why).
	End(outcome string, err error)
	// TraceID is the span's trace id, 32 hex digits, for the exemplars of the
	// handler duration histogram; "" when there is none.
	TraceID() string
}

// Tracing traces every delivery the worker handles with t (see Tracer; package
// otelworkq has the OpenTelemetry one). Default: none.
func Tracing(t Tracer) Option {
	return func(c *config) error {
		if t == nil {
			return option.Nil("Tracing's Tracer")
		}
		c.tracer = t
		return nil
	}
}

// deliverySpan is a delivery's span as the worker holds it: ended at most once,
// whichever path ends the delivery first.
type deliverySpan struct {
	span DeliverySpan
	once sync.Once
}

// startSpan begins j's span when the worker traces, and returns the delivery's
// context.
func (w *Worker) startSpan(ctx context.Context, j *Job) context.Context {
	if w.cfg.tracer == nil {
		return ctx
	}
	ctx, s := w.cfg.tracer.StartDelivery(ctx, Delivery{
		Queue: w.names.Queue, Worker: w.cfg.name, JobID: j.id, Kind: j.kind, Header: j.msg.Headers(),
		Schedule: j.schedule, Delivered: j.md.NumDelivered, EnqueuedAt: j.enqueuedAt,
	})
	if s != nil {
		j.span = &deliverySpan{span: s}
	}
	return ctx
}

// spanEvent records a step of j's delivery on its span, if it has one.
func (j *Job) spanEvent(name string, kv ...any) {
	if j.span != nil {
		j.span.span.Event(name, kv...)
	}
}

// endSpan ends j's span with outcome, once.
func (j *Job) endSpan(outcome string, err error) {
	if j.span != nil {
		j.span.once.Do(func() { j.span.span.End(outcome, err) })
	}
}

// traceID is the trace id of j's span, "" without one.
func (j *Job) traceID() string {
	if j.span == nil {
		return ""
	}
	return j.span.span.TraceID()
}
