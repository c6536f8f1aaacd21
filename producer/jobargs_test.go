package producer_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

type invoice struct {
	Number string `json:"number"`
	Cents  int    `json:"cents"`
}

func (invoice) Kind() string { return "invoice" }

// refund names its kind with a pointer receiver.
type refund struct {
	Invoice string `json:"invoice"`
}

func (*refund) Kind() string { return "refund" }

// unencodable has a field JSON cannot encode.
type unencodable struct{ C chan int }

func (unencodable) Kind() string { return "unencodable" }

func TestNewJobEncodesArgsUnderTheirKind(t *testing.T) {
	t.Parallel()
	j, err := producer.NewJob(invoice{Number: "F-1", Cents: 990}, producer.ID("inv-1"), producer.Header("Trace", "t1"), producer.MaxAttempts(3))
	if err != nil {
		t.Fatal(err)
	}
	if j.Kind != "invoice" || string(j.Payload) != `{"number":"F-1","cents":990}` || j.ID != "inv-1" || j.Header.Get("Trace") != "t1" || j.MaxAttempts != 3 {
		t.Fatalf("NewJob = %+v (payload %s)", j, j.Payload)
	}
	if j, err = producer.NewJob(&refund{Invoice: "F-1"}, producer.Kind("refund")); err != nil || j.Kind != "refund" || string(j.Payload) != `{"invoice":"F-1"}` {
		t.Fatalf("NewJob(&refund, Kind of the same kind) = %+v, %v", j, err)
	}

	var nilRefund *refund
	for name, c := range map[string]struct {
		args producer.JobArgs
		opts []producer.EnqueueOption
		says string
	}{
		"nil":           {nil, nil, "nil job args"},
		"nil pointer":   {nilRefund, nil, "nil job args: *producer_test.refund"},
		"another kind":  {invoice{}, []producer.EnqueueOption{producer.Kind("refund")}, `producer_test.invoice is of kind "invoice": Kind("refund"): want "invoice" or no Kind option`},
		"not JSON-able": {unencodable{}, nil, "producer_test.unencodable as JSON"},
	} {
		_, err := producer.NewJob(c.args, c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: NewJob returned %v, want an error saying %q", name, err, c.says)
		}
		if strings.HasPrefix(name, "nil") && !errors.Is(err, producer.ErrNilArgs) {
			t.Errorf("%s: %v is not ErrNilArgs", name, err)
		}
		// Bad arguments, like bad options everywhere, wrap ErrInvalidOption.
		if name != "not JSON-able" && !errors.Is(err, producer.ErrInvalidOption) {
			t.Errorf("%s: %v is not ErrInvalidOption", name, err)
		}
	}
}

func TestEnqueueArgsStoresTheJSONAndKind(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p, err := producer.New(ctx, js, "billing")
	if err != nil {
		t.Fatal(err)
	}
	info, err := p.EnqueueArgs(ctx, invoice{Number: "F-2", Cents: 5}, producer.ID("inv-2"), producer.MaxAttempts(4))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "WORKQ_billing")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetMsg(ctx, info.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != `{"number":"F-2","cents":5}` || msg.Header.Get("Workq-Kind") != "invoice" ||
		msg.Header.Get("Workq-Max-Attempts") != "4" || msg.Subject != "workq.billing.jobs.inv-2" {
		t.Fatalf("stored job: subject %s, headers %v, payload %s", msg.Subject, msg.Header, msg.Data)
	}
	if _, err := p.EnqueueArgs(ctx, invoice{}, producer.Kind("refund")); err == nil || !strings.Contains(err.Error(), "queue billing") {
		t.Fatalf("EnqueueArgs with a Kind option of another kind: %v", err)
	}
	if _, err := p.EnqueueArgs(ctx, nil); !errors.Is(err, producer.ErrNilArgs) {
		t.Fatalf("EnqueueArgs(nil): %v", err)
	}
	if st, err := s.Info(ctx); err != nil || st.State.Msgs != 1 {
		t.Fatalf("refused jobs were stored: %+v, %v", st, err)
	}
}

// A typed schedule fires jobs of its args' kind and JSON, which a typed handler
// decodes (issue 26: a schedule needed its kind by hand); nil args and another Kind
// option are refused.
func TestScheduleArgsFiresTypedJobs(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	p := mustNew(t, js, "typed-schedules")
	s, err := p.ScheduleArgs(ctx, "monthly-invoice", "@every 1s", invoice{Number: "F-7", Cents: 500}, producer.MaxAttempts(2))
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != "invoice" || s.MaxAttempts != 2 || string(s.Payload) != `{"number":"F-7","cents":500}` {
		t.Fatalf("schedule %+v (payload %s)", s, s.Payload)
	}
	mux := consumer.NewMux()
	got := make(chan invoice, 1)
	if err := consumer.RouteArgs(mux, func(_ context.Context, _ *consumer.Job, inv invoice) error {
		select {
		case got <- inv:
		default:
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w, err := consumer.New(ctx, js, "typed-schedules", mux, consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(rctx) }()
	defer func() { stop(); <-ran }()
	select {
	case inv := <-got:
		if inv != (invoice{Number: "F-7", Cents: 500}) {
			t.Errorf("the handler decoded %+v", inv)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no firing reached the typed handler")
	}
	if _, err := p.ScheduleArgs(ctx, "x", "@daily", nil); !errors.Is(err, producer.ErrNilArgs) {
		t.Errorf("ScheduleArgs(nil): %v, want ErrNilArgs", err)
	}
	if _, err := p.ScheduleArgs(ctx, "x", "@daily", invoice{}, producer.Kind("refund")); !errors.Is(err, producer.ErrInvalidOption) {
		t.Errorf("ScheduleArgs with another Kind: %v, want ErrInvalidOption", err)
	}
}
