package otelworkq_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/otelworkq"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// traced is a queue with a traced producer and worker, their spans recorded.
type traced struct {
	rec  *tracetest.SpanRecorder
	tp   *sdktrace.TracerProvider
	p    *producer.Producer
	reg  *prometheus.Registry
	js   jetstream.JetStream
	ctx  context.Context
	fail sync.Map // job id → attempts that fail; "dead": fails for good
}

func newTraced(t *testing.T, q string, opts ...consumer.Option) *traced {
	t.Helper()
	js := testenv.Start(t).JetStream(t)
	tr := &traced{rec: tracetest.NewSpanRecorder(), reg: prometheus.NewRegistry(), js: js, ctx: testenv.Context(t, 60*time.Second)}
	tr.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tr.rec))
	tracer := otelworkq.New(otelworkq.WithTracerProvider(tr.tp))
	var err error
	if tr.p, err = producer.New(tr.ctx, js, q, producer.Tracing(tracer)); err != nil {
		t.Fatal(err)
	}
	handler := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		// The handler's own span nests in the delivery's.
		_, s := tr.tp.Tracer("handler").Start(ctx, "handle "+j.ID())
		defer s.End()
		switch f, _ := tr.fail.Load(j.ID()); {
		case f == "block":
			<-ctx.Done() // until the job is cancelled
			return ctx.Err()
		case f == "dead":
			return consumer.Permanent(errors.New("no such mailbox"))
		case f != nil && j.Attempt() <= f.(int):
			return errors.New("smtp timeout")
		}
		return nil
	})
	w, err := consumer.New(tr.ctx, js, q, handler, append([]consumer.Option{consumer.Tracing(tracer), consumer.Metrics(tr.reg),
		consumer.Backoff(consumer.Constant(50 * time.Millisecond)), consumer.Logger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-done })
	return tr
}

// deliveries waits for n ended delivery spans of job id (by workq.outcome), in the
// order they ended.
func (tr *traced) deliveries(t *testing.T, id string, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	testenv.Eventually(t, 20*time.Second, "the deliveries' spans of "+id, func() bool {
		got = got[:0]
		for _, s := range tr.rec.Ended() {
			if s.SpanKind() == trace.SpanKindConsumer && attr(s, "messaging.message.id") == id {
				got = append(got, s)
			}
		}
		return len(got) >= n
	})
	return got
}

// handlerSpan is the handler's span of a delivery span.
func (tr *traced) handlerSpan(t *testing.T, of sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range tr.rec.Ended() {
		if s.Parent().SpanID() == of.SpanContext().SpanID() && s.Parent().TraceID() == of.SpanContext().TraceID() {
			return s
		}
	}
	t.Fatalf("no handler span under %s", of.Name())
	return nil
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) bool {
	for _, e := range s.Events() {
		if e.Name == name {
			return true
		}
	}
	return false
}

// A request's span, the job it enqueues, the job's failed attempt, its retry and its
// commit are one trace: each delivery is a child of the request's span, with its
// claim, the retry's scheduling and the commit as events, and the handler's span
// nests in it. The handler duration histogram carries the trace id as an exemplar.
func TestTraceFromEnqueueToCommit(t *testing.T) {
	t.Parallel()
	tr := newTraced(t, "emails")
	tr.fail.Store("welcome", 1)
	ctx, req := tr.tp.Tracer("http").Start(tr.ctx, "POST /signup")
	if _, err := tr.p.Enqueue(ctx, []byte("hi"), producer.ID("welcome"), producer.Kind("email")); err != nil {
		t.Fatal(err)
	}
	req.End()
	if r, err := tr.p.Wait(tr.ctx, "welcome"); err != nil || r.State != producer.StateDone {
		t.Fatalf("welcome: %+v, %v", r, err)
	}
	runs := tr.deliveries(t, "welcome", 2)
	want := req.SpanContext()
	for i, s := range runs {
		if s.Parent().TraceID() != want.TraceID() || s.Parent().SpanID() != want.SpanID() {
			t.Errorf("delivery %d: parent %s/%s, want the request's span %s/%s", i+1, s.Parent().TraceID(), s.Parent().SpanID(), want.TraceID(), want.SpanID())
		}
		if s.Name() != "process emails" || attr(s, "messaging.destination.name") != "emails" || attr(s, "workq.job.kind") != "email" ||
			attr(s, "workq.job.fencing_token") == "" || attr(s, "workq.worker") == "" || !hasEvent(s, "claim") {
			t.Errorf("delivery %d: %s %v, events %v", i+1, s.Name(), s.Attributes(), s.Events())
		}
		h := tr.handlerSpan(t, s)
		if h.Name() != "handle welcome" {
			t.Errorf("delivery %d: handler span %q", i+1, h.Name())
		}
	}
	first, second := runs[0], runs[1]
	if attr(first, "workq.outcome") != "retried" || attr(first, "workq.job.attempt") != "1" || !hasEvent(first, "retry scheduled") ||
		first.Status().Code != codes.Error || first.Status().Description != "smtp timeout" {
		t.Errorf("first delivery: %v, status %v, events %v", first.Attributes(), first.Status(), first.Events())
	}
	if attr(second, "workq.outcome") != "committed" || attr(second, "workq.job.attempt") != "2" || !hasEvent(second, "commit") ||
		second.Status().Code == codes.Error {
		t.Errorf("second delivery: %v, status %v, events %v", second.Attributes(), second.Status(), second.Events())
	}
	// The duration histogram's exemplars name the trace.
	mfs, err := tr.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "workq_job_handler_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				for _, l := range b.GetExemplar().GetLabel() {
					found = found || l.GetName() == "trace_id" && l.GetValue() == want.TraceID().String()
				}
			}
		}
	}
	if !found {
		t.Error("no exemplar of the job duration histogram names the trace")
	}
}

// A delayed job's delivery is a child of the span it was enqueued in; a job that
// dies ends its delivery's span dead, with a dead letter event and an error status.
func TestTraceDelayedAndDead(t *testing.T) {
	t.Parallel()
	tr := newTraced(t, "later")
	tr.fail.Store("doomed", "dead")
	ctx, req := tr.tp.Tracer("http").Start(tr.ctx, "POST /remind")
	if _, err := tr.p.Enqueue(ctx, nil, producer.ID("delayed"), producer.After(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.p.Enqueue(ctx, nil, producer.ID("doomed")); err != nil {
		t.Fatal(err)
	}
	req.End()
	for _, id := range []string{"delayed", "doomed"} {
		s := tr.deliveries(t, id, 1)[0]
		if s.Parent().SpanID() != req.SpanContext().SpanID() || s.SpanContext().TraceID() != req.SpanContext().TraceID() {
			t.Errorf("%s: parent %s, trace %s; want the request's span %s, trace %s", id, s.Parent().SpanID(), s.SpanContext().TraceID(), req.SpanContext().SpanID(), req.SpanContext().TraceID())
		}
	}
	dead := tr.deliveries(t, "doomed", 1)[0]
	if attr(dead, "workq.outcome") != "dead" || !hasEvent(dead, "dead letter") || dead.Status().Code != codes.Error {
		t.Errorf("doomed: %v, status %v, events %v", dead.Attributes(), dead.Status(), dead.Events())
	}
	if s := tr.deliveries(t, "delayed", 1)[0]; attr(s, "workq.outcome") != "committed" {
		t.Errorf("delayed: %v", s.Attributes())
	}
}

// A message another client published with a traceparent of its own joins that trace.
func TestTraceForeignTraceparent(t *testing.T) {
	t.Parallel()
	tr := newTraced(t, "foreign")
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	h := nats.Header{}
	h.Set("traceparent", "00-"+traceID+"-"+spanID+"-01")
	h.Set("Nats-Msg-Id", "from-python")
	if _, err := tr.js.PublishMsg(tr.ctx, &nats.Msg{Subject: "workq.foreign.jobs", Header: h, Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	s := tr.deliveries(t, "from-python", 1)[0]
	if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != spanID || !s.Parent().IsRemote() {
		t.Errorf("delivery: trace %s, parent %s (remote %v); want %s, %s", s.SpanContext().TraceID(), s.Parent().SpanID(), s.Parent().IsRemote(), traceID, spanID)
	}
}

// Each firing of a periodic schedule starts a trace of its own, linked to the span
// the schedule was created in.
func TestTracePeriodicFirings(t *testing.T) {
	t.Parallel()
	tr := newTraced(t, "ticks")
	ctx, setup := tr.tp.Tracer("deploy").Start(tr.ctx, "configure schedules")
	if _, err := tr.p.Schedule(ctx, "tick", "@every 1s", nil); err != nil {
		t.Fatal(err)
	}
	setup.End()
	var firings []sdktrace.ReadOnlySpan
	testenv.Eventually(t, 20*time.Second, "two firings", func() bool {
		firings = firings[:0]
		for _, s := range tr.rec.Ended() {
			if s.SpanKind() == trace.SpanKindConsumer && attr(s, "workq.schedule") == "tick" {
				firings = append(firings, s)
			}
		}
		return len(firings) >= 2
	})
	if err := tr.p.RemoveSchedule(tr.ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	seen := map[trace.TraceID]bool{}
	for _, s := range firings[:2] {
		id := s.SpanContext().TraceID()
		if id == setup.SpanContext().TraceID() || seen[id] || s.Parent().IsValid() {
			t.Errorf("firing %s: trace %s, parent %v; want a new root trace per firing", attr(s, "messaging.message.id"), id, s.Parent().SpanID())
		}
		seen[id] = true
		if l := s.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != setup.SpanContext().SpanID() {
			t.Errorf("firing %s: links %v; want the schedule's span", attr(s, "messaging.message.id"), l)
		}
	}
}

// Without Tracing a producer writes no trace header, and a worker makes no span, even
// with a span in the enqueue's context.
func TestNoTracingByDefault(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p, err := producer.New(ctx, js, "plain")
	if err != nil {
		t.Fatal(err)
	}
	sctx, s := tp.Tracer("http").Start(ctx, "POST /x")
	if _, err := p.Enqueue(sctx, nil, producer.ID("x")); err != nil {
		t.Fatal(err)
	}
	s.End()
	var header nats.Header
	w, err := consumer.New(ctx, js, "plain", consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		header = j.Header()
		if trace.SpanContextFromContext(ctx).IsValid() {
			return consumer.Permanent(errors.New("a span in the handler's context"))
		}
		return nil
	}), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() { stop(); <-done }()
	if r, err := p.Wait(ctx, "x"); err != nil || r.State != producer.StateDone {
		t.Fatalf("x: %+v, %v", r, err)
	}
	if header.Get("traceparent") != "" || len(rec.Ended()) != 1 {
		t.Errorf("header %v, spans %d; want no traceparent and only the request's span", header, len(rec.Ended()))
	}
}

// The jobs of a batch, a workflow's tasks (the one released by its parent's commit
// too), a sequence's jobs and a dead job requeued from the dead letters all run as
// children of the span they were enqueued in.
func TestTraceBatchWorkflowSequenceRequeue(t *testing.T) {
	t.Parallel()
	tr := newTraced(t, "flows")
	tr.fail.Store("once-dead", "dead")
	ctx, req := tr.tp.Tracer("http").Start(tr.ctx, "POST /orders")
	if _, err := tr.p.EnqueueBatch(ctx, []producer.Job{{ID: "b1"}, {ID: "b2"}}); err != nil {
		t.Fatal(err)
	}
	wf := producer.NewWorkflow("wf").Task("a", producer.Job{}).Task("b", producer.Job{}, producer.DependsOn("a"))
	if _, err := tr.p.EnqueueWorkflow(ctx, wf); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s1", "s2"} {
		if _, err := tr.p.Enqueue(ctx, nil, producer.ID(id), producer.Sequence("acct-7")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.p.Enqueue(ctx, nil, producer.ID("once-dead")); err != nil {
		t.Fatal(err)
	}
	req.End()
	tr.deliveries(t, "once-dead", 1)
	tr.fail.Delete("once-dead")
	a, err := admin.New(tr.js)
	if err != nil {
		t.Fatal(err)
	}
	var requeued []admin.Requeued
	testenv.Eventually(t, 10*time.Second, "the dead letter to be requeued", func() bool {
		requeued, err = a.RequeueDead(tr.ctx, "flows", admin.Selection{IDs: []string{"once-dead"}}, nil)
		return err == nil && len(requeued) == 1
	})
	runs := tr.deliveries(t, "once-dead", 2)
	if attr(runs[1], "workq.outcome") != "committed" {
		t.Errorf("the requeued job's delivery: %v", runs[1].Attributes())
	}
	for _, id := range []string{"b1", "b2", "wf.a", "wf.b", "s1", "s2", "once-dead"} {
		for _, s := range tr.deliveries(t, id, 1) {
			if s.Parent().SpanID() != req.SpanContext().SpanID() || s.SpanContext().TraceID() != req.SpanContext().TraceID() {
				t.Errorf("%s: parent %s in trace %s; want the request's span %s", id, s.Parent().SpanID(), s.SpanContext().TraceID(), req.SpanContext().SpanID())
			}
		}
	}
}

// A job cancelled while it runs ends its delivery's span cancelled, with the cause as
// its error.
func TestTraceCancelled(t *testing.T) {
	t.Parallel()
	tr := newTraced(t, "stopped", consumer.AckWait(time.Second))
	tr.fail.Store("long", "block")
	if _, err := tr.p.Enqueue(tr.ctx, nil, producer.ID("long")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "long to run", func() bool {
		r, err := tr.p.Status(tr.ctx, "long")
		return err == nil && r.State == producer.StateRunning
	})
	if _, err := tr.p.Cancel(tr.ctx, "long"); err != nil {
		t.Fatal(err)
	}
	s := tr.deliveries(t, "long", 1)[0]
	if attr(s, "workq.outcome") != "cancelled" || s.Status().Code != codes.Error {
		t.Errorf("cancelled run: %v, status %v", s.Attributes(), s.Status())
	}
}
