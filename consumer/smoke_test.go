package consumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

func TestCommitsResultAndRecord(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "smoke")
	info, err := p.Enqueue(testenv.Context(t, 10*time.Second), []byte("hello"), producer.ID("j1"), producer.Kind("greet"))
	if err != nil || info.ID != "j1" || info.Duplicate {
		t.Fatalf("Enqueue = %+v, %v", info, err)
	}
	if r := status(t, p, "j1"); r.State != producer.StateQueued || r.Kind != "greet" {
		t.Fatalf("before work: %+v", r)
	}
	var token uint64
	w := newWorker(t, js, "smoke", consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		var err error
		if token, err = j.FencingToken(ctx); err != nil {
			return err
		}
		j.SetResult(append([]byte("done:"), j.Payload()...))
		return j.Fence(ctx)
	}), consumer.Name("w1"))
	stop := runWorker(t, w)
	testenv.Eventually(t, 10*time.Second, "job done", func() bool { return status(t, p, "j1").State == producer.StateDone })
	stop()
	r := status(t, p, "j1")
	if string(r.Result) != "done:hello" || r.Attempt != 1 || r.Worker.Name != "w1" || token == 0 {
		t.Fatalf("record %+v token %d", r, token)
	}
	if r.StartedAt.IsZero() || r.FinishedAt.Before(r.StartedAt) || r.EnqueuedAt.After(r.StartedAt) {
		t.Fatalf("times: %+v", r)
	}
	if s := w.Stats(); s.Committed != 1 || s.Started != 1 {
		t.Fatalf("stats %+v", s)
	}
}
