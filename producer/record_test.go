package producer_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A queued job's record has a usable zero Worker (no nil to trip on), and a committed
// job's record encodes as the document in the bucket, byte for byte.
func TestStatusRecordIsTheBucketsDocument(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p, err := producer.New(ctx, js, "recs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("hi"), producer.ID("r1"), producer.Kind("greet")); err != nil {
		t.Fatal(err)
	}

	queued, err := p.Status(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if queued.State != producer.StateQueued || !queued.Worker.IsZero() || queued.Worker.Name != "" || !queued.StartedAt.IsZero() {
		t.Fatalf("queued record: %+v", queued)
	}
	b, err := json.Marshal(queued)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); strings.Contains(s, `"worker"`) || strings.Contains(s, `"started_at"`) || !strings.Contains(s, `"state":"queued"`) {
		t.Fatalf("queued record's JSON: %s", s)
	}

	w, err := consumer.New(ctx, js, "recs", consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		j.SetResult([]byte("hello"))
		return nil
	}), consumer.Logger(slog.New(slog.DiscardHandler)), consumer.Name("rec-worker"))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	var rec *producer.Record
	testenv.Eventually(t, 10*time.Second, "job r1 done", func() bool {
		rec, err = p.Status(ctx, "r1")
		return err == nil && rec.State == producer.StateDone
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rec.Worker.IsZero() || rec.Worker.Name != "rec-worker" || rec.Worker.PID == 0 || !rec.State.Terminal() {
		t.Fatalf("done record: %+v", rec)
	}

	kv, err := js.KeyValue(ctx, "WORKQ_recs_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if b, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if string(b) != string(entry.Value()) || rec.Revision != entry.Revision() {
		t.Fatalf("Status's record encodes as\n%s (revision %d)\nthe bucket holds\n%s (revision %d)", b, rec.Revision, entry.Value(), entry.Revision())
	}
}
