package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// When the workers' consumer is deleted and re-created (an operator; a server that
// lost its state), delivery counts restart at 1. Fencing does not depend on them
// alone: jobs running at that moment finish and commit once, jobs in the worker's
// buffer run once (through the new consumer), a job committed whose ack was lost is
// not run again, and a job waiting out its retry backoff is not stalled by its
// record's delivery count from the old consumer.
func TestConsumerResetNeitherStallsNorRerunsJobs(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "reset"
	const ackWait = 6 * time.Second // a stalled job would wait this long: longer than the test allows it
	p := newProducer(t, js, q)
	runs := &runLog{}
	started, release := make(chan string, 2), make(chan struct{})
	logs := &logRecorder{}
	w, err := consumer.New(testenv.Context(t, 10*time.Second), js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		runs.add(j.ID(), j.Attempt())
		switch {
		case j.ID() == "retrying" && j.Attempt() == 1:
			return consumer.RetryAfter(500*time.Millisecond, errors.New("not yet"))
		case strings.HasPrefix(j.ID(), "running-"):
			started <- j.ID()
			<-release
		}
		return nil
	}), consumer.AckWait(ackWait), consumer.Concurrency(2), consumer.Prefetch(2), consumer.Logger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}

	// "committed": a worker ran it and committed it, then died before its ack landed.
	ctx := testenv.Context(t, 30*time.Second)
	info, err := p.Enqueue(ctx, []byte("c"), producer.ID("committed"))
	if err != nil {
		t.Fatal(err)
	}
	msg, enqueue := takeDelivery(t, js, q)
	if string(msg.Data()) != "c" {
		t.Fatalf("took %q, want the committed job", msg.Data())
	}
	writeRecord(t, js, q, "committed", map[string]any{
		"id": "committed", "queue": q, "state": "done", "attempt": 1, "enqueue": enqueue, "run": "gone-1",
		"sequence": info.Sequence, "worker": map[string]any{"name": "gone", "host": "h", "pid": 1},
	})
	for _, id := range []string{"retrying", "running-1", "running-2", "buffered-1", "buffered-2"} {
		if _, err := p.Enqueue(ctx, []byte(id), producer.ID(id)); err != nil {
			t.Fatal(err)
		}
	}
	runWorker(t, w)
	<-started
	<-started
	testenv.Eventually(t, 10*time.Second, "running jobs claimed, retrying job waiting, buffered jobs pulled", func() bool {
		c, err := js.Consumer(ctx, "WORKQ_"+q, "workers")
		if err != nil {
			return false
		}
		ci, err := c.Info(ctx)
		return err == nil && ci.NumPending == 0 &&
			status(t, p, "running-1").State == producer.StateRunning && status(t, p, "running-2").State == producer.StateRunning &&
			status(t, p, "retrying").State == producer.StateRetrying
	})

	if err := js.DeleteConsumer(ctx, "WORKQ_"+q, "workers"); err != nil {
		t.Fatal(err)
	}
	reset := time.Now()
	testenv.Eventually(t, 10*time.Second, "the worker to re-create the consumer and drop the buffered deliveries of the old one", func() bool {
		return w.Stats().Dropped == 2
	})
	close(release)

	ids := []string{"committed", "retrying", "running-1", "running-2", "buffered-1", "buffered-2"}
	testenv.Eventually(t, 15*time.Second, "every job done and the stream empty", func() bool {
		for _, id := range ids {
			if status(t, p, id).State != producer.StateDone {
				return false
			}
		}
		return pendingMessages(t, js, q) == 0
	})
	want := map[string][]int{"committed": nil, "retrying": {1, 2}, "running-1": {1}, "running-2": {1}, "buffered-1": {1}, "buffered-2": {1}}
	for id, attempts := range want {
		if got := runs.runs(id); !slices.Equal(got, attempts) {
			t.Errorf("%s ran attempts %v, want %v", id, got, attempts)
		}
	}
	// Waiting out the old consumer's delivery count would take AckWait after the
	// reset; noticing the new consumer takes a heartbeat interval at most.
	if starts := runs.startTimes("retrying"); len(starts) == 2 && starts[1].Sub(reset) > ackWait-time.Second {
		t.Errorf("retrying job ran again %s after the reset: it waited for the old consumer's delivery count", starts[1].Sub(reset).Round(time.Millisecond))
	}
	if err := w.Health(); err != nil {
		t.Errorf("Health after the consumer was re-created: %v", err)
	}
	if r := status(t, p, "committed"); r.Worker.Name != "gone" {
		t.Errorf("committed job's record was rewritten: %+v", r)
	}
}

// A workers' consumer that cannot be re-created — another, incompatible one took its
// place — leaves the worker unhealthy with the reason, logged as an error; once the
// way is clear again, the worker re-creates its consumer and is healthy.
func TestIncompatibleConsumerMakesWorkerUnhealthy(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "unhealthy"
	p := newProducer(t, js, q)
	logs := &errorLog{}
	done := make(chan string, 10)
	w, err := consumer.New(testenv.Context(t, 10*time.Second), js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		done <- j.ID()
		return nil
	}), consumer.AckWait(time.Second), consumer.Logger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if err := w.Health(); err != nil {
		t.Fatalf("Health of a running worker: %v", err)
	}
	ctx := testenv.Context(t, 30*time.Second)
	stream, err := js.Stream(ctx, "WORKQ_"+q)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteConsumer(ctx, "workers"); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
		FilterSubjects: []string{"workq." + q + ".jobs", "workq." + q + ".jobs.>"},
	}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the worker to report the incompatible consumer", func() bool {
		err := w.Health()
		return err != nil && errors.Is(err, consumer.ErrIncompatible)
	})
	if !logs.has(slog.LevelError, "the worker cannot pull jobs") {
		t.Errorf("no error logged for a consumer the worker cannot use: %v", logs.all())
	}
	// While the incompatible consumer stays, the worker pulls nothing through it (a
	// job enqueued now waits) and stays unhealthy: a pull that worked would have
	// cleared its health.
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("meanwhile")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := w.Health(); !errors.Is(err, consumer.ErrIncompatible) {
			t.Fatalf("Health %v while the incompatible consumer is in place; want ErrIncompatible", err)
		}
		select {
		case id := <-done:
			t.Fatalf("ran %s through the incompatible consumer", id)
		default:
		}
	}

	if err := stream.DeleteConsumer(ctx, "workers"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the worker to re-create its consumer and be healthy", func() bool { return w.Health() == nil })
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("after")); err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for len(ran) < 2 {
		select {
		case id := <-done:
			ran[id] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("ran %v after the consumer was re-created; want meanwhile and after", ran)
		}
	}
	if !ran["meanwhile"] || !ran["after"] {
		t.Fatalf("ran %v; want meanwhile and after", ran)
	}
}

// errorLog keeps log records with their levels.
type errorLog struct {
	logRecorder
	levels []slog.Level
}

func (l *errorLog) Handle(ctx context.Context, r slog.Record) error {
	l.mu.Lock()
	l.levels = append(l.levels, r.Level)
	l.mu.Unlock()
	return l.logRecorder.Handle(ctx, r)
}
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errorLog) WithGroup(string) slog.Handler      { return l }

func (l *errorLog) has(level slog.Level, prefix string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, m := range l.msgs {
		if l.levels[i] == level && strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}
