package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// sendEmail names its kind with a value receiver.
type sendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

func (sendEmail) Kind() string { return "send_email" }

// resize names its kind with a pointer receiver that reads the receiver: workers
// must call it on a real zero value, not on a nil pointer.
type resize struct {
	Path  string `json:"path"`
	Width int    `json:"width"`
}

func (r *resize) Kind() string {
	if r.Width < 0 {
		return "resize_negative"
	}
	return "resize"
}

// Jobs enqueued typed, one at a time and in a batch, reach the handlers routed by
// their type, decoded; a payload that does not decode into the type is dead-lettered
// with ErrMalformed.
func TestJobArgsRoundTrip(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "typed"
	ctx := testenv.Context(t, 30*time.Second)
	p := newProducer(t, js, q)

	mux := consumer.NewMux()
	if err := consumer.RouteArgs(mux, func(_ context.Context, j *consumer.Job, e sendEmail) error {
		j.SetResult(fmt.Appendf(nil, "%s|%s|%s", j.Kind(), e.To, e.Subject))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := consumer.RouteArgs(mux, func(_ context.Context, j *consumer.Job, r *resize) error {
		j.SetResult(fmt.Appendf(nil, "%s|%s@%d", j.Kind(), r.Path, r.Width))
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	if _, err := p.EnqueueArgs(ctx, sendEmail{To: "ada@example.com", Subject: "hi"}, producer.ID("e1")); err != nil {
		t.Fatal(err)
	}
	var jobs []producer.Job
	for i, a := range []producer.JobArgs{&resize{Path: "cat.png", Width: 64}, sendEmail{To: "bob@example.com"}} {
		j, err := producer.NewJob(a, producer.ID(fmt.Sprintf("b%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	if _, err := p.EnqueueBatch(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	// A publisher that got the kind right and the payload wrong.
	if _, err := p.Enqueue(ctx, []byte(`{"to":42}`), producer.ID("bad"), producer.Kind("send_email")); err != nil {
		t.Fatal(err)
	}

	runWorker(t, newWorker(t, js, q, mux))
	want := map[string]string{
		"e1": "send_email|ada@example.com|hi",
		"b0": "resize|cat.png@64",
		"b1": "send_email|bob@example.com|",
	}
	for id, result := range want {
		testenv.Eventually(t, 10*time.Second, id+" done", func() bool { return status(t, p, id).State == producer.StateDone })
		if r := status(t, p, id); string(r.Result) != result {
			t.Errorf("job %s: result %q, want %q", id, r.Result, result)
		}
	}
	testenv.Eventually(t, 10*time.Second, "bad dead", func() bool { return status(t, p, "bad").State == producer.StateDead })
	if r := status(t, p, "bad"); !strings.Contains(r.LastError, consumer.ErrMalformed.Error()) || r.Attempt != 1 {
		t.Errorf("malformed job: attempt %d, last error %q; want one attempt, dead with %q", r.Attempt, r.LastError, consumer.ErrMalformed)
	}
}

// kindless has no kind: RouteArgs routes jobs without one to it, as Route("") does.
type kindless struct{}

func (kindless) Kind() string { return "" }

// panicky's Kind cannot be called on a zero value.
type panicky struct{ names []string }

func (p panicky) Kind() string { return p.names[0] }

// verbose's kind is longer than a producer would enqueue.
type verbose struct{}

func (verbose) Kind() string { return strings.Repeat("k", 2000) }

func TestRouteArgsRefusesTypesWithoutAKind(t *testing.T) {
	t.Parallel()
	mux := consumer.NewMux()
	for says, route := range map[string]func() error{
		"is an interface type": func() error {
			return consumer.RouteArgs(mux, func(context.Context, *consumer.Job, consumer.JobArgs) error { return nil })
		},
		"Kind panicked on a zero value": func() error {
			return consumer.RouteArgs(mux, func(context.Context, *consumer.Job, panicky) error { return nil })
		},
		"more than 1024": func() error {
			return consumer.RouteArgs(mux, func(context.Context, *consumer.Job, verbose) error { return nil })
		},
		"nil Mux": func() error {
			return consumer.RouteArgs(nil, func(context.Context, *consumer.Job, sendEmail) error { return nil })
		},
	} {
		err := route()
		if err == nil || !strings.HasPrefix(err.Error(), "consumer: route") || !strings.Contains(err.Error(), says) {
			t.Errorf("RouteArgs returned %v, want an error saying %q", err, says)
		}
		if says == "nil Mux" && !errors.Is(err, consumer.ErrInvalidOption) {
			t.Errorf("nil Mux: %v is not ErrInvalidOption", err)
		}
	}
	if err := consumer.RouteArgs(mux, func(context.Context, *consumer.Job, kindless) error { return nil }); err != nil {
		t.Errorf("a type of kind \"\": %v", err)
	}
}

// A nil handler removes the type's route; its jobs then have no handler.
func TestRouteArgsNilRemovesTheRoute(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "unrouted"
	p := newProducer(t, js, q)
	mux := consumer.NewMux()
	ran := make(chan struct{}, 1)
	if err := consumer.RouteArgs(mux, func(context.Context, *consumer.Job, sendEmail) error { ran <- struct{}{}; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := consumer.RouteArgs[sendEmail](mux, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.EnqueueArgs(testenv.Context(t, 10*time.Second), sendEmail{To: "x"}, producer.ID("gone")); err != nil {
		t.Fatal(err)
	}
	runWorker(t, newWorker(t, js, q, mux))
	testenv.Eventually(t, 10*time.Second, "the job dead", func() bool { return status(t, p, "gone").State == producer.StateDead })
	if r := status(t, p, "gone"); !strings.Contains(r.LastError, consumer.ErrUnknownKind.Error()) {
		t.Errorf("last error %q, want %q", r.LastError, consumer.ErrUnknownKind)
	}
	select {
	case <-ran:
		t.Error("the removed handler ran")
	default:
	}
}
