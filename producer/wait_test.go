package producer_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Wait returns a job's final record as it is written: done with its result after a
// retry (not the retrying record), dead, cancelled while it waited; at once for a
// job that ended before, and for an id the queue does not know (ErrNotFound); and
// ctx's error while a job still waits.
func TestWaitReturnsTheFinalRecord(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 60*time.Second)
	p := mustNew(t, js, "waits")

	type waited struct {
		rec *producer.Record
		err error
	}
	wait := func(id string) <-chan waited {
		ch := make(chan waited, 1)
		go func() {
			rec, err := p.Wait(ctx, id)
			ch <- waited{rec, err}
		}()
		return ch
	}
	for _, id := range []string{"flaky", "doomed", "later"} {
		opts := []producer.EnqueueOption{producer.ID(id)}
		if id == "later" {
			opts = append(opts, producer.After(time.Hour))
		}
		if _, err := p.Enqueue(ctx, []byte(id), opts...); err != nil {
			t.Fatal(err)
		}
	}
	flaky, doomed, later := wait("flaky"), wait("doomed"), wait("later")

	// No worker yet: a Wait with a short context ends with it.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := p.Wait(short, "flaky"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with no worker: %v, want the context's deadline", err)
	}
	cancel()
	if _, err := p.Wait(ctx, "nobody"); !errors.Is(err, producer.ErrNotFound) {
		t.Errorf("Wait for an unknown id: %v, want ErrNotFound", err)
	}

	var runs atomic.Int32
	w, err := consumer.New(ctx, js, "waits", consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		switch j.ID() {
		case "doomed":
			return consumer.Permanent(errors.New("no such mailbox"))
		case "flaky":
			if runs.Add(1) == 1 {
				return consumer.RetryAfter(200*time.Millisecond, errors.New("busy"))
			}
		}
		j.SetResult([]byte("sent " + j.ID()))
		return nil
	}), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(rctx) }()
	defer func() { stop(); <-ran }()

	get := func(ch <-chan waited, what string) waited {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(20 * time.Second):
			t.Fatalf("Wait for %s did not return", what)
			return waited{}
		}
	}
	if r := get(flaky, "flaky"); r.err != nil || r.rec.State != producer.StateDone || string(r.rec.Result) != "sent flaky" || r.rec.Attempt != 2 {
		t.Errorf("Wait(flaky) = %+v, %v; want done on attempt 2 with its result", r.rec, r.err)
	}
	if r := get(doomed, "doomed"); r.err != nil || r.rec.State != producer.StateDead {
		t.Errorf("Wait(doomed) = %+v, %v; want dead", r.rec, r.err)
	}
	if _, err := p.Cancel(ctx, "later"); err != nil {
		t.Fatal(err)
	}
	if r := get(later, "later"); r.err != nil || r.rec.State != producer.StateCancelled {
		t.Errorf("Wait(later) = %+v, %v; want cancelled", r.rec, r.err)
	}
	// A job that ended already: at once.
	start := time.Now()
	if rec, err := p.Wait(ctx, "flaky"); err != nil || rec.State != producer.StateDone {
		t.Errorf("Wait for an ended job: %+v, %v", rec, err)
	} else if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Wait for an ended job took %s", d)
	}
}
