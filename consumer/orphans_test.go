package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A message the server keeps below its consumer's ack floor (a crash lost the
// removal its ack made) is never delivered again. The test makes one without a crash:
// with the workers' consumer narrowed to job b, jobs a and c are enqueued before b,
// b is acked (the floor passes a and c), and the consumer is widened again. A worker
// starting then removes a, whose record says done, and leaves c, whose job has no
// record, saying so; neither runs, and the delayed job d, not the consumer's, stays.
func TestWorkerSweepsFinishedJobsBelowAckFloor(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	p := newProducer(t, js, "orph")
	var runs atomic.Int32
	h := consumer.HandlerFunc(func(context.Context, *consumer.Job) error { runs.Add(1); return nil })
	stop := runWorker(t, newWorker(t, js, "orph", h)) // creates the consumers
	s, c := workersConsumer(t, js, "orph")
	stop()
	wide := c.CachedInfo().Config
	narrow := wide
	narrow.FilterSubjects = []string{"workq.orph.jobs.b"}
	if _, err := s.UpdateConsumer(ctx, narrow); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "c"} {
		if _, err := p.Enqueue(ctx, []byte(id), producer.ID(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Enqueue(ctx, []byte("d"), producer.ID("d"), producer.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("b"), producer.ID("b")); err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1)
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	records := recordStore(t, js, "orph")
	if err := records.Create(ctx, &record.Record{ID: "a", Queue: "orph", State: record.Done, Attempt: 1, Sequence: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateConsumer(ctx, wide); err != nil {
		t.Fatal(err)
	}
	if ci, err := c.Info(ctx); err != nil || ci.AckFloor.Stream != 4 || ci.NumPending != 0 {
		t.Fatalf("the setup did not leave a, c and d below the ack floor: %+v, %v", ci, err)
	}

	logs := &logRecorder{}
	runWorker(t, newWorker(t, js, "orph", h, consumer.Logger(slog.New(logs))))
	testenv.Eventually(t, 10*time.Second, "a's message removed", func() bool {
		_, err := s.GetMsg(ctx, 1)
		return errors.Is(err, jetstream.ErrMsgNotFound)
	})
	for seq, id := range map[uint64]string{2: "c", 3: "d"} {
		if m, err := s.GetMsg(ctx, seq); err != nil || !strings.HasSuffix(m.Subject, "."+id) {
			t.Errorf("message %d (job %s): %v; want it kept", seq, id, err)
		}
	}
	testenv.Eventually(t, 5*time.Second, "the warning about c", func() bool {
		return logs.hasPrefix("jobs whose messages the server keeps below its consumer's ack floor")
	})
	if n := runs.Load(); n != 0 {
		t.Errorf("%d jobs ran; want none", n)
	}
}

// The sweep runs while the worker runs, not only when it starts or recovers: an
// orphan made below the ack floor after the worker started (as above, with the
// consumer narrowed to job b while the worker runs, so that b is delivered and
// acked before a, whose record says done) is removed within a few AckWaits, and a
// never runs. Fails without the periodic sweep (a stays in the stream).
func TestWorkerSweepsContinually(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	p := newProducer(t, js, "orphc")
	var ranA atomic.Int32
	h := consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		if j.ID() == "a" {
			ranA.Add(1)
		}
		return nil
	})
	runWorker(t, newWorker(t, js, "orphc", h, consumer.AckWait(time.Second)))
	s, c := workersConsumer(t, js, "orphc")
	// Past the first sweep, so that what removes a is a later one (should a loaded
	// machine delay the first, the test proves less; it does not fail).
	time.Sleep(2 * time.Second)
	wide := c.CachedInfo().Config
	narrow := wide
	narrow.FilterSubjects = []string{"workq.orphc.jobs.b"}
	if _, err := s.UpdateConsumer(ctx, narrow); err != nil {
		t.Fatal(err)
	}
	records := recordStore(t, js, "orphc")
	a, err := p.Enqueue(ctx, []byte("a"), producer.ID("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := records.Create(ctx, &record.Record{ID: "a", Queue: "orphc", State: record.Done, Attempt: 1, Sequence: a.Sequence}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("b"), producer.ID("b")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "b run and acked past a", func() bool {
		ci, err := c.Info(ctx)
		return err == nil && ci.AckFloor.Stream > a.Sequence
	})
	if _, err := s.UpdateConsumer(ctx, wide); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "a's message removed", func() bool {
		_, err := s.GetMsg(ctx, a.Sequence)
		return errors.Is(err, jetstream.ErrMsgNotFound)
	})
	if n := ranA.Load(); n != 0 {
		t.Errorf("a ran %d times; want never", n)
	}
}

// recordStore opens the job records of queue q, as a worker writes them.
func recordStore(t *testing.T, js jetstream.JetStream, q string) record.Store {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	records, err := record.NewStore(ctx, js, kv, "WORKQ_"+q+"_JOBS", false)
	if err != nil {
		t.Fatal(err)
	}
	return records
}

// workersConsumer waits for the workers' consumer of queue q (normal priority) and
// returns it with its stream.
func workersConsumer(t *testing.T, js jetstream.JetStream, q string) (jetstream.Stream, jetstream.Consumer) {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	s, err := js.Stream(ctx, "WORKQ_"+q)
	if err != nil {
		t.Fatal(err)
	}
	var c jetstream.Consumer
	testenv.Eventually(t, 10*time.Second, "the workers' consumer", func() bool {
		c, err = s.Consumer(ctx, "workers")
		return err == nil
	})
	return s, c
}
