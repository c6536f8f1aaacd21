package record_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/testenv"
)

// Linearizable reads (the stream's message-get API) see what KV's own reads see:
// the value and revision of a live record, and no record after a delete or purge.
func TestLinearizableGet(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 10*time.Second)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "WORKQ_lin_JOBS", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := record.Store{JS: js, KV: kv, Bucket: "WORKQ_lin_JOBS", Linearizable: true}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("Get of a missing record: %v, want ErrNotFound", err)
	}
	r := &record.Record{ID: "a", Queue: "lin", State: record.Running, Attempt: 2, Run: "r7"}
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "a")
	if err != nil || got.Revision != r.Revision || got.Attempt != 2 || got.Run != "r7" || got.State != record.Running {
		t.Fatalf("Get = %+v, %v; want the record written at revision %d", got, err, r.Revision)
	}
	if err := kv.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("Get after delete: %v, want ErrNotFound", err)
	}
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("Get after purge: %v, want ErrNotFound", err)
	}
}
