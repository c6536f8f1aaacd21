package record_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/testenv"
)

// DeleteKey leaves a marker that expires: the keys the server indexes are the live
// ones once it did, a write over a deleted key expects the marker's revision until
// then and 0 after, and a delete at an old revision leaves the value written since. KeysUnder lists the keys under a prefix only, and
// FirstKeyUnder finds the oldest value, stepping over a marker.
func TestKeyIndex(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "WORKQ_keys_JOBS", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	// As a queue's records bucket: a TTL per write (DeleteKey's markers expire).
	st, err := js.Stream(ctx, "KV_WORKQ_keys_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.AllowMsgTTL = true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	s := record.Store{JS: js, KV: kv, Bucket: "WORKQ_keys_JOBS"}
	keys := func() []string {
		t.Helper()
		var got []string
		n, err := s.KeysUnder(ctx, "==.l.", func(k string) { got = append(got, k) })
		if err != nil || n != len(got) {
			t.Fatalf("KeysUnder: %d, %v; listed %v", n, err, got)
		}
		slices.Sort(got)
		return got
	}
	if _, err := s.FirstKeyUnder(ctx, "==.l.", 0); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("FirstKeyUnder of none: %v, want ErrNotFound", err)
	}
	put := func(key string, prev uint64) uint64 {
		t.Helper()
		rev, err := kv.Update(ctx, key, []byte(`{"job":"x"}`), prev)
		if err != nil {
			t.Fatalf("write %s over %d: %v", key, prev, err)
		}
		return rev
	}
	// A marker before the first live key: FirstKeyUnder steps over it.
	put("==.l.gone", 0)
	if err := kv.Purge(ctx, "==.l.gone"); err != nil {
		t.Fatal(err)
	}
	beforeA := time.Now()
	revA := put("==.l.a", 0)
	put("==.l.b", 0)
	put("==.other", 0)
	if err := s.Create(ctx, &record.Record{ID: "job", Queue: "keys", State: record.Queued}); err != nil {
		t.Fatal(err)
	}
	if got := keys(); !slices.Equal(got, []string{"==.l.a", "==.l.b", "==.l.gone"}) {
		t.Fatalf("keys under ==.l.: %v", got)
	}
	if e, err := s.FirstKeyUnder(ctx, "==.l.", 0); err != nil || e.Key != "==.l.a" || e.Rev != revA || string(e.Value) != `{"job":"x"}` ||
		e.At.Before(beforeA.Add(-time.Second)) || e.At.After(time.Now()) {
		t.Fatalf("FirstKeyUnder: %+v, %v; want ==.l.a, written after %s", e, err, beforeA)
	}
	if e, err := s.FirstKeyUnder(ctx, "==.l.", revA+1); err != nil || e.Key != "==.l.b" {
		t.Fatalf("FirstKeyUnder after a: %+v, %v; want ==.l.b", e, err)
	}

	if err := s.DeleteKey(ctx, "==.l.a", revA); err != nil {
		t.Fatal(err)
	}
	// A marker, which a write over the key expects, until it expires.
	if _, rev, err := s.GetKey(ctx, "==.l.a"); !errors.Is(err, record.ErrNotFound) || rev <= revA {
		t.Fatalf("a after its delete: revision %d, %v; want its marker's", rev, err)
	}
	testenv.Eventually(t, 10*time.Second, "a's marker to expire", func() bool {
		return slices.Equal(keys(), []string{"==.l.b", "==.l.gone"}) // gone's marker, a KV purge's, stays
	})
	if _, rev, err := s.GetKey(ctx, "==.l.a"); !errors.Is(err, record.ErrNotFound) || rev != 0 {
		t.Fatalf("a after its marker expired: revision %d, %v; want none", rev, err)
	}
	revA2 := put("==.l.a", 0)
	if err := s.DeleteKey(ctx, "==.l.a", revA); err != nil {
		t.Fatalf("delete at an old revision: %v", err)
	}
	if _, rev, err := s.GetKey(ctx, "==.l.a"); err != nil || rev != revA2 {
		t.Fatalf("a after a delete at its old revision: revision %d, %v; want %d kept", rev, err, revA2)
	}
}
