package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// The record keeps the error of every failed attempt, newest last, up to ten: a job
// that failed twice and then committed shows both; one that failed twelve times shows
// the last ten (the last one says the attempts ran out).
func TestRecordKeepsEachAttemptsError(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "error-history"
	p := newProducer(t, js, q)
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if j.ID() == "flaky" && j.Attempt() > 2 {
			return nil
		}
		return fmt.Errorf("failure of attempt %d", j.Attempt())
	})
	runWorker(t, newWorker(t, js, q, h, consumer.MaxAttempts(12), consumer.Backoff(consumer.Constant(5*time.Millisecond))))
	ctx := testenv.Context(t, 60*time.Second)
	for _, id := range []string{"flaky", "doomed"} {
		if _, err := p.Enqueue(ctx, nil, producer.ID(id)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(id string, state producer.State, first, last int) {
		t.Helper()
		r, err := p.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != state || len(r.Errors) != last-first+1 {
			t.Fatalf("%s: %s with %d errors, want %s with attempts %d…%d: %+v", id, r.State, len(r.Errors), state, first, last, r.Errors)
		}
		for i, e := range r.Errors {
			if want := first + i; e.Attempt != want || !strings.HasSuffix(e.Error, fmt.Sprintf("failure of attempt %d", want)) || e.At.IsZero() {
				t.Errorf("%s: error %d is %+v, want attempt %d's", id, i, e, want)
			}
			// Each attempt's start and worker, for the dashboard's timeline.
			if e.Started.IsZero() || e.Started.After(e.At) || e.Worker != r.Worker.Name {
				t.Errorf("%s: error %d started %s, ended %s, on %q; want a start before its end, on %q", id, i, e.Started, e.At, e.Worker, r.Worker.Name)
			}
		}
	}
	check("flaky", producer.StateDone, 1, 2)
	check("doomed", producer.StateDead, 3, 12)
}
