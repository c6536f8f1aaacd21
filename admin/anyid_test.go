package admin_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Any text is a job id and a unique key (issue 25: producer.ID("user@example.com")
// was refused): the job runs under the id as given, its record, the listing and its
// dead letter show it so, a second enqueue of it is a duplicate, a delayed one fires
// and can be cancelled, a unique key with spaces holds its jobs apart, and a dead
// one is requeued by its id. Ids that were tokens already and ids that look like
// encoded ones ("==…") both keep their own identity.
func TestAnyTextIsAJobID(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	a := adm(t, js)
	ctx := testenv.Context(t, 60*time.Second)
	const q = "ids"
	p, err := producer.New(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"user@example.com", "two words", "==looks-encoded", "日本/ü.é", "*", "a..b", "plain-1", "dies: once"}
	for _, id := range ids {
		if _, err := p.Enqueue(ctx, []byte(id), producer.ID(id)); err != nil {
			t.Fatalf("Enqueue(%q): %v", id, err)
		}
	}
	if info, err := p.Enqueue(ctx, nil, producer.ID("user@example.com")); err != nil || !info.Duplicate || info.ID != "user@example.com" {
		t.Fatalf("a second enqueue of user@example.com: %+v, %v; want a duplicate", info, err)
	}
	const later, never = "later: user@example.com", "never <x@y>"
	if _, err := p.Enqueue(ctx, []byte(later), producer.ID(later), producer.After(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, nil, producer.ID(never), producer.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if rec, err := p.Status(ctx, never); err != nil || rec.State != producer.StateScheduled || rec.ID != never {
		t.Fatalf("Status(%q) = %+v, %v; want scheduled", never, rec, err)
	}
	if rec, err := p.Cancel(ctx, never); err != nil || rec.State != producer.StateCancelled {
		t.Fatalf("Cancel(%q) = %+v, %v", never, rec, err)
	}
	const key = "customer 42 <ada@example.com>"
	first, err := p.Enqueue(ctx, nil, producer.ID("u1"), producer.Unique(key))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := p.Enqueue(ctx, nil, producer.ID("u2"), producer.Unique(key)); err != nil || !info.Duplicate || info.ID != first.ID {
		t.Fatalf("a second job with unique key %q: %+v, %v; want the first one's", key, info, err)
	}
	ids = append(ids, later, "u1")

	var mu sync.Mutex
	ran := map[string]int{}
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		mu.Lock()
		ran[j.ID()]++
		n := ran[j.ID()]
		mu.Unlock()
		if j.ID() != "u1" && j.ID() != string(j.Payload()) {
			return consumer.Permanent(errors.New("payload of another job"))
		}
		if j.ID() == "dies: once" && n == 1 {
			return consumer.Permanent(errors.New("first run fails"))
		}
		return nil
	}), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(t, w)
	for _, id := range ids {
		want := producer.StateDone
		if id == "dies: once" {
			want = producer.StateDead
		}
		testenv.Eventually(t, 20*time.Second, id+" "+string(want), func() bool { return jobState(t, p, id) == want })
	}
	testenv.Eventually(t, 10*time.Second, "the dead letter requeued by its id", func() bool {
		got, err := a.RequeueDead(ctx, q, admin.Selection{IDs: []string{"dies: once"}}, nil)
		return err == nil && len(got) == 1 && got[0].JobID == "dies: once"
	})
	testenv.Eventually(t, 20*time.Second, "the requeued job done", func() bool { return jobState(t, p, "dies: once") == producer.StateDone })

	mu.Lock()
	for _, id := range ids {
		if want := map[bool]int{true: 2, false: 1}[id == "dies: once"]; ran[id] != want {
			t.Errorf("job %q ran %d times, want %d", id, ran[id], want)
		}
	}
	if len(ran) != len(ids) {
		t.Errorf("ran %v; want the jobs %q", ran, ids)
	}
	mu.Unlock()
	page, err := a.Jobs(ctx, q, admin.JobQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, j := range page.Jobs {
		listed = append(listed, j.ID)
	}
	for _, id := range append(ids, never) {
		if !slices.Contains(listed, id) {
			t.Errorf("the job list %q lacks %q", listed, id)
		}
	}
	// The key is released with u1's end: a new job may take it. The worker releases
	// it, and acks u1's message, after it writes u1's record done; until then the
	// key still names u1 (a duplicate, which enqueues nothing): wait for the release.
	testenv.Eventually(t, 10*time.Second, "a job with unique key "+key+" taken after the first ended", func() bool {
		info, err := p.Enqueue(ctx, nil, producer.ID("u3"), producer.Unique(key))
		if err != nil || info.Duplicate && info.ID != "u1" {
			t.Fatalf("a job with unique key %q after the first ended: %+v, %v; want it taken (or, until the release, u1's duplicate)", key, info, err)
		}
		return !info.Duplicate
	})
	for _, bad := range []string{"a\nb", "\xff"} {
		if _, err := p.Enqueue(ctx, nil, producer.ID(bad)); !errors.Is(err, producer.ErrInvalidName) {
			t.Errorf("Enqueue(id %q): %v, want ErrInvalidName", bad, err)
		}
	}
}
