// Package otelworkq traces workq's jobs with OpenTelemetry: the trace of the context
// a job is enqueued with travels in its message (W3C traceparent and tracestate
// headers), and each delivery a worker handles is a span of that trace, from its
// arrival to its outcome, in which the handler's own spans nest.
//
//	t := otelworkq.New() // the global TracerProvider and propagator, or options
//	p, err := producer.New(ctx, js, "emails", producer.Tracing(t))
//	w, err := consumer.New(ctx, js, "emails", h, consumer.Tracing(t))
//
// A delivery's span is named "process <queue>", of kind consumer, with the
// messaging conventions' attributes (messaging.system "workq", the queue as
// messaging.destination.name, the job id as messaging.message.id) and workq's own:
// workq.job.kind, workq.job.attempt, workq.job.fencing_token, workq.worker,
// workq.delivery.count and workq.outcome. Its events are the claim, the commit, a
// retry's scheduling and a dead letter; a handler's error is recorded on it and sets
// its status. A delivery that finds its job taken over, or cancelled, ends with the
// outcome reassigned or cancelled.
//
// A job enqueued with a span in its context is that span's child, delayed ones too,
// and so is each of its runs: a failed attempt, its retry and the commit are one
// trace. A job a periodic schedule fires starts a trace of its own, linked to the
// span the schedule was created in. A message from another client carrying a
// traceparent of its own joins that trace the same way.
//
// The package is apart from producer and consumer so that programs that do not trace
// compile none of OpenTelemetry; a worker or producer without Tracing does no tracing
// work at all.
package otelworkq

import (
	"context"
	"fmt"
	"net/textproto"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
)

// Tracer is both a producer.Tracer and a consumer.Tracer.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

var (
	_ producer.Tracer = (*Tracer)(nil)
	_ consumer.Tracer = (*Tracer)(nil)
)

// Option configures a Tracer.
type Option func(*options)

type options struct {
	provider trace.TracerProvider
	prop     propagation.TextMapPropagator
}

// WithTracerProvider sets the provider of the workers' spans. Default: the global
// one (otel.GetTracerProvider), read when New is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.provider = tp }
}

// WithPropagator sets how a trace context is written to and read from job headers.
// Default: the global propagator (otel.GetTextMapPropagator) when one is set, else
// W3C trace context and baggage.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(o *options) { o.prop = p }
}

// scope is the instrumentation scope of the spans.
const scope = "github.com/workq/workq/otelworkq"

// New returns a Tracer for producer.Tracing and consumer.Tracing.
func New(opts ...Option) *Tracer {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.provider == nil {
		o.provider = otel.GetTracerProvider()
	}
	if o.prop == nil {
		o.prop = otel.GetTextMapPropagator()
		if len(o.prop.Fields()) == 0 { // the global default propagates nothing
			o.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
		}
	}
	return &Tracer{tracer: o.provider.Tracer(scope), prop: o.prop}
}

// Inject implements producer.Tracer: it writes ctx's trace context into h.
func (t *Tracer) Inject(ctx context.Context, h nats.Header) {
	t.prop.Inject(ctx, headerCarrier(h))
}

// StartDelivery implements consumer.Tracer: it starts the delivery's span, a child of
// the trace its message carries, or, for a periodic schedule's firing, the root of a
// trace of its own linked to it.
func (t *Tracer) StartDelivery(ctx context.Context, d consumer.Delivery) (context.Context, consumer.DeliverySpan) {
	carried := trace.SpanContextFromContext(t.prop.Extract(context.Background(), headerCarrier(d.Header)))
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "workq"),
			attribute.String("messaging.operation.name", "process"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", d.Queue),
			attribute.String("messaging.message.id", d.JobID),
			attribute.String("workq.job.kind", d.Kind),
			attribute.String("workq.worker", d.Worker),
			attribute.Int64("workq.delivery.count", int64(min(d.Delivered, 1<<62))),
		),
	}
	switch {
	case d.Schedule != "":
		opts = append(opts, trace.WithNewRoot(), trace.WithAttributes(attribute.String("workq.schedule", d.Schedule)))
		if carried.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: carried}))
		}
	case carried.IsValid():
		ctx = trace.ContextWithRemoteSpanContext(ctx, carried)
	}
	ctx, s := t.tracer.Start(ctx, "process "+d.Queue, opts...)
	return ctx, span{s}
}

// span is a delivery's span.
type span struct{ s trace.Span }

func (s span) Claimed(attempt int, token uint64) {
	attrs := []attribute.KeyValue{attribute.Int("workq.job.attempt", attempt)}
	if token != 0 {
		attrs = append(attrs, attribute.Int64("workq.job.fencing_token", int64(min(token, 1<<62))))
	}
	s.s.SetAttributes(attrs...)
	s.s.AddEvent("claim", trace.WithAttributes(attrs...))
}

func (s span) Event(name string, kv ...any) {
	s.s.AddEvent(name, trace.WithAttributes(attributes(kv)...))
}

func (s span) End(outcome string, err error) {
	s.s.SetAttributes(attribute.String("workq.outcome", outcome))
	if err != nil {
		s.s.RecordError(err)
		s.s.SetStatus(codes.Error, firstLine(err.Error()))
	}
	s.s.End()
}

func (s span) TraceID() string {
	sc := s.s.SpanContext()
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// attributes turns slog-style pairs into attributes: strings, integers, floats,
// booleans and durations as they are, anything else formatted.
func attributes(kv []any) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			continue
		}
		k = "workq." + k
		switch v := kv[i+1].(type) {
		case string:
			out = append(out, attribute.String(k, v))
		case int:
			out = append(out, attribute.Int(k, v))
		case int64:
			out = append(out, attribute.Int64(k, v))
		case uint64:
			out = append(out, attribute.Int64(k, int64(min(v, 1<<62))))
		case float64:
			out = append(out, attribute.Float64(k, v))
		case bool:
			out = append(out, attribute.Bool(k, v))
		case time.Duration:
			out = append(out, attribute.String(k, v.String()))
		default:
			out = append(out, attribute.String(k, fmt.Sprint(v)))
		}
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// headerCarrier reads and writes a trace context in NATS headers. Header names are
// kept as the propagator writes them (traceparent, tracestate), the form other
// clients use; a read also finds a canonicalised one (Traceparent).
type headerCarrier nats.Header

func (c headerCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	if v := c[textproto.CanonicalMIMEHeaderKey(key)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c headerCarrier) Set(key, value string) { c[key] = []string{value} }

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
