package consumertest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/consumertest"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Each example's body is what a test function would hold; t stands for its
// *testing.T (the helpers take any testing.TB).

// sendWelcome is the handler under test.
func sendWelcome(ctx context.Context, j *consumer.Job) error {
	if len(j.Payload()) == 0 {
		return consumer.Permanent(errors.New("no address"))
	}
	j.SetResult([]byte("sent to " + string(j.Payload())))
	return nil
}

// Work runs one attempt of a handler on a real worker and server and reports what
// the worker did: here it committed the job with its result, and dead-lettered one
// the handler refused for good.
func ExampleWork() {
	test(func(t testing.TB) {
		res := consumertest.Work(t, consumer.HandlerFunc(sendWelcome), []byte("ada@example.com"))
		fmt.Println(res.Outcome, string(res.Record.Result))

		res = consumertest.Work(t, consumer.HandlerFunc(sendWelcome), nil)
		fmt.Println(res.Outcome, res.Err)
	})
	// Output:
	// committed sent to ada@example.com
	// dead permanent: no address
}

// A failed attempt comes back Retrying, with the delay before the next one: the
// handler's RetryAfter, or the worker's backoff. Attempt runs the job as a later
// attempt; a panic is a failure whose value and stack are kept.
func ExampleWork_retry() {
	test(func(t testing.TB) {
		res := consumertest.Work(t, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
			return consumer.RetryAfter(30*time.Second, errors.New("rate limited"))
		}), nil)
		fmt.Println(res.Outcome, res.Delay, res.Err)

		res = consumertest.Work(t, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
			panic(fmt.Sprintf("attempt %d", j.Attempt()))
		}), nil, consumertest.Attempt(3), consumertest.WorkerOptions(consumer.Backoff(consumer.Constant(time.Minute))))
		fmt.Println(res.Outcome, res.Delay, res.Panic, res.Record.Attempt)
	})
	// Output:
	// retried 30s retry after 30s: rate limited
	// retried 1m0s attempt 3 3
}

// Reminder is a typed job.
type Reminder struct {
	Note string `json:"note"`
}

// Kind names Reminder jobs.
func (Reminder) Kind() string { return "reminder" }

// WorkArgs runs a typed job through the Mux that routes it.
func ExampleWorkArgs() {
	test(func(t testing.TB) {
		mux := consumer.NewMux()
		err := consumer.RouteArgs(mux, func(ctx context.Context, j *consumer.Job, r Reminder) error {
			j.SetResult([]byte("noted: " + r.Note))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		res := consumertest.WorkArgs(t, mux, Reminder{Note: "water the plants"})
		fmt.Println(res.Outcome, string(res.Record.Result))
	})
	// Output: committed noted: water the plants
}

// schedule is the code under test: it enqueues a reminder.
func schedule(ctx context.Context, p *producer.Producer, note string) error {
	_, err := p.EnqueueArgs(ctx, Reminder{Note: note}, producer.ID("reminder-1"))
	return err
}

// RequireEnqueuedArgs checks what the code under test enqueued: exactly one job of
// the type's kind, decoded.
func ExampleRequireEnqueuedArgs() {
	test(func(t testing.TB) {
		env := testenv.Start(t)
		js := env.JetStream(t)
		p, err := producer.New(context.Background(), js, "reminders")
		if err != nil {
			t.Fatal(err)
		}
		if err := schedule(context.Background(), p, "call Ada"); err != nil {
			t.Fatal(err)
		}

		r, job := consumertest.RequireEnqueuedArgs[Reminder](t, js, "reminders", consumertest.Match{})
		fmt.Println(job.ID, job.Kind, r.Note)
		consumertest.RequireNotEnqueued(t, js, "reminders", consumertest.Match{Kind: "invoice"})
	})
	// Output: reminder-1 reminder call Ada
}
