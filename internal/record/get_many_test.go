package record_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/testenv"
)

// GetMany reads, in requests of up to 1000 keys, the live records of the ids asked
// for, each at its latest revision, and leaves out ids with no record, a delete or
// purge marker, or a value that is not their record.
func TestGetMany(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "WORKQ_many_JOBS", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := record.Store{JS: js, KV: kv, Bucket: "WORKQ_many_JOBS"}
	var ids []string
	want := map[string]uint64{}
	for i := range 1500 {
		id := fmt.Sprintf("w.t%d", i)
		ids = append(ids, id)
		r := &record.Record{ID: id, Queue: "many", State: record.Waiting}
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if i%100 == 7 { // written twice: the second revision is the one read
			if err := s.Update(ctx, r, r.Revision); err != nil {
				t.Fatal(err)
			}
		}
		want[id] = r.Revision
	}
	for _, gone := range []string{"w.t3", "w.t1200"} {
		if err := kv.Delete(ctx, gone); err != nil {
			t.Fatal(err)
		}
		delete(want, gone)
	}
	if err := kv.Purge(ctx, "w.t4"); err != nil {
		t.Fatal(err)
	}
	delete(want, "w.t4")
	if _, err := kv.Put(ctx, "w.t5", []byte(`{"id":"someone else","state":"done"}`)); err != nil {
		t.Fatal(err)
	}
	delete(want, "w.t5")
	ids = append(ids, "w.missing", "odd id with spaces")

	got := s.GetMany(ctx, ids)
	if len(got) != len(want) {
		t.Errorf("%d records read, want %d", len(got), len(want))
	}
	for id, rev := range want {
		r := got[id]
		switch {
		case r == nil:
			t.Errorf("%s: not read", id)
		case r.Revision != rev || r.ID != id || r.State != record.Waiting:
			t.Errorf("%s: %+v, want revision %d", id, r, rev)
		}
	}
}
