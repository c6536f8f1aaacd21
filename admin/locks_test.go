package admin_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/kvlock"
	"github.com/workq/workq/testenv"
)

// LockBuckets finds kvlock buckets only, Locks lists a bucket's holders without
// creating a bucket, Limiters reports a limiter's permits in its window.
func TestLocksAndLimiters(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	a := adm(t, js)
	if bs, err := a.LockBuckets(ctx); err != nil || len(bs) != 0 {
		t.Fatalf("LockBuckets on an empty server: %v, %v", bs, err)
	}
	if _, err := a.Locks(ctx, kvlock.DefaultBucket); !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("Locks of a missing bucket: %v; want ErrNotFound", err)
	}
	if bs, _ := a.LockBuckets(ctx); len(bs) != 0 {
		t.Fatalf("Locks created a bucket: %v", bs)
	}
	l, err := kvlock.New(ctx, js, kvlock.Owner("tester"))
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.Acquire(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lk.Release(ctx) }()
	sem, err := l.Semaphore("pool", 3)
	if err != nil {
		t.Fatal(err)
	}
	slot, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = slot.Release(ctx) }()
	// A KV bucket that is not kvlock's is not listed.
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "OTHER"}); err != nil {
		t.Fatal(err)
	}
	bs, err := a.LockBuckets(ctx)
	if err != nil || !slices.Equal(bs, []string{kvlock.DefaultBucket}) {
		t.Fatalf("LockBuckets = %v, %v; want [%s]", bs, err, kvlock.DefaultBucket)
	}
	es, err := a.Locks(ctx, kvlock.DefaultBucket)
	if err != nil || len(es) != 2 {
		t.Fatalf("Locks = %+v, %v; want the lock and one slot", es, err)
	}
	if es[0].Name != "deploy" || es[0].Kind != "lock" || es[0].Holder.Owner != "tester" ||
		es[1].Name != "pool" || es[1].Kind != "semaphore" || es[1].Slot < 0 {
		t.Fatalf("Locks = %+v", es)
	}

	lim, err := l.Limiter(ctx, "api", 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if ok, _, err := lim.Allow(ctx); err != nil || !ok {
			t.Fatalf("Allow: %v, %v", ok, err)
		}
	}
	ls, err := a.Limiters(ctx)
	if err != nil || len(ls) != 1 {
		t.Fatalf("Limiters = %+v, %v", ls, err)
	}
	if g := ls[0]; g.Name != "api" || g.Rate != 5 || time.Duration(g.Window) != time.Minute || g.Used != 2 || g.Last.IsZero() {
		t.Fatalf("Limiters[0] = %+v; want api, 5 per 1m, 2 used", g)
	}
}
