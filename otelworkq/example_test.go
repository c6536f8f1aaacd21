package otelworkq_test

import (
	"context"
	"fmt"
	"log"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/embedded"
	"github.com/workq/workq/otelworkq"
	"github.com/workq/workq/producer"
)

// A request's span, the job it enqueues and the job's run are one trace.
func Example() {
	ctx := context.Background()
	srv, err := embedded.Run(embedded.TmpfsStore())
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	nc, err := nats.Connect(srv.URL(), srv.ClientOptions()...)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	spans := tracetest.NewSpanRecorder() // in a program: an OTLP exporter
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t := otelworkq.New(otelworkq.WithTracerProvider(tp))

	p, err := producer.New(ctx, js, "emails", producer.Tracing(t))
	if err != nil {
		log.Fatal(err)
	}
	rctx, req := tp.Tracer("http").Start(ctx, "POST /signup")
	if _, err := p.Enqueue(rctx, []byte("ada@example.com"), producer.ID("welcome-ada")); err != nil {
		log.Fatal(err)
	}
	req.End()

	wctx, stop := context.WithCancel(ctx)
	w, err := consumer.New(ctx, js, "emails", consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		defer stop()
		return nil
	}), consumer.Tracing(t))
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(wctx); err != nil {
		log.Fatal(err)
	}
	for _, s := range spans.Ended() {
		fmt.Printf("%s, in the request's trace: %v\n", s.Name(), s.SpanContext().TraceID() == req.SpanContext().TraceID())
	}
	// Output:
	// POST /signup, in the request's trace: true
	// process emails, in the request's trace: true
}
