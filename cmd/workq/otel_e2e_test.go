package main_test

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace endpoint that keeps what it receives.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	svc   []string // each span's resource's service.name
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		svc := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				svc = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				o.spans, o.svc = append(o.spans, s), append(o.svc, svc)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

// `workq work --otel` exports a span per run over OTLP/HTTP to the endpoint the
// standard variables name, under OTEL_SERVICE_NAME, in the trace of the traceparent
// the job carried, and hands the run's span to the command as TRACEPARENT; a protocol
// other than http/protobuf is a usage error.
func TestWorkOtel(t *testing.T) {
	t.Parallel()
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	q := "otel-work"
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	ok(t, "", "enqueue", q, "hello", "--id", "traced", "-H", "traceparent=00-"+traceID+"-"+parentID+"-01")

	w := newProc([]string{"work", q, "--otel", "--", "sh", "-c", `printf %s "$TRACEPARENT"`})
	w.cmd.Env = append(w.cmd.Env, "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL, "OTEL_SERVICE_NAME=mailer", "OTEL_BSP_SCHEDULE_DELAY=100")
	w.launch(t)
	waitFor(t, 20*time.Second, "traced done", func() bool { return getJob(t, q, "traced").State == "done" })
	// The command's TRACEPARENT: the run's span, in the job's trace.
	tp := strings.Split(string(getJob(t, q, "traced").Result), "-")
	if len(tp) != 4 || tp[1] != traceID || tp[2] == parentID {
		t.Fatalf("the command's TRACEPARENT: %q; want trace %s and the run's span", getJob(t, q, "traced").Result, traceID)
	}
	var run *tracepb.Span
	var svc string
	waitFor(t, 20*time.Second, "the run's span exported", func() bool {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		for i, s := range recv.spans {
			if s.GetName() == "process "+q {
				run, svc = s, recv.svc[i]
				return true
			}
		}
		return false
	})
	if got := hex.EncodeToString(run.GetTraceId()); got != traceID || hex.EncodeToString(run.GetParentSpanId()) != parentID ||
		hex.EncodeToString(run.GetSpanId()) != tp[2] || svc != "mailer" || run.GetKind() != tracepb.Span_SPAN_KIND_CONSUMER {
		t.Errorf("exported span: trace %s, parent %x, span %x, kind %v, service %q; want trace %s, parent %s, span %s, consumer, mailer",
			got, run.GetParentSpanId(), run.GetSpanId(), run.GetKind(), svc, traceID, parentID, tp[2])
	}
	w.stop(t)

	r := wqEnv(t, []string{"OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}, "", "work", q, "--otel", "--", "true")
	oneLine(t, r, 2, "http/protobuf only")
}
