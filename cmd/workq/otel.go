package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/workq/workq/otelworkq"
)

// otelUsage is the help of --otel.
const otelUsage = "trace every job's run with OpenTelemetry, exported over OTLP/HTTP as the standard OTEL_EXPORTER_OTLP_* and OTEL_SERVICE_NAME variables say (default endpoint http://localhost:4318; service workq); the command gets TRACEPARENT"

// tracing is an OpenTelemetry pipeline for --otel: the tracer the worker uses, the
// propagator that hands the run's trace to the command, and the shutdown that
// flushes the spans not yet exported.
type tracing struct {
	tracer   *otelworkq.Tracer
	prop     propagation.TextMapPropagator
	shutdown func(context.Context) error
}

// startTracing builds the --otel pipeline: spans batched to an OTLP/HTTP exporter
// configured by the environment, as every OpenTelemetry SDK reads it. Only the
// http/protobuf protocol is built in; another one asked for is an error, not a
// silent switch.
func startTracing(ctx context.Context) (*tracing, error) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" && p != "http/protobuf" {
			return nil, usageError{fmt.Errorf("--otel: %s=%s: workq exports over http/protobuf only (OTLP/HTTP, port 4318)", v, p)}
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("--otel: the OTLP exporter: %w", err)
	}
	// The environment (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) wins over the
	// default name.
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName("workq")), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("--otel: the resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	return &tracing{
		tracer:   otelworkq.New(otelworkq.WithTracerProvider(tp), otelworkq.WithPropagator(prop)),
		prop:     prop,
		shutdown: tp.Shutdown,
	}, nil
}

// env is the environment that hands ctx's trace to a command: TRACEPARENT and
// TRACESTATE (and BAGGAGE), the names tools such as otel-cli read.
func (t *tracing) env(ctx context.Context) []string {
	if t == nil {
		return nil
	}
	c := propagation.MapCarrier{}
	t.prop.Inject(ctx, c)
	var env []string
	for k, v := range c {
		env = append(env, strings.ToUpper(k)+"="+v)
	}
	return env
}
