package producer

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/option"
)

// Tracer carries the trace of an enqueue's context in its jobs' messages (Tracing),
// so that a worker's span of each run joins it. Package otelworkq implements it with
// OpenTelemetry (W3C traceparent and tracestate headers), so that this package, and a
// program that does not trace, compile none of it.
type Tracer interface {
	// Inject writes the trace context of ctx, if it has one, into h, the headers of
	// a job message being built: a job enqueued alone, in a batch, delayed, a
	// workflow's task, a sequence's job, or a periodic schedule (whose firings are
	// linked to it).
	Inject(ctx context.Context, h nats.Header)
}

// Tracing carries the trace of each enqueue's context in its jobs' messages with t
// (see Tracer; package otelworkq has the OpenTelemetry one). Default: none, and no
// cost.
func Tracing(t Tracer) Option {
	return func(c *config) error {
		if t == nil {
			return option.Nil("Tracing's Tracer")
		}
		c.tracer = t
		return nil
	}
}
