package producer_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Jobs and JobCounts keep an index of the records from their first call and read only
// what was written since at each: a record written again moves to the newest end in
// its new state, a purged one goes, a record past the bucket's age limit goes, a
// sequence's links are no jobs, and a queue deleted and created again starts a new
// index. A producer that starts cold agrees with the one that kept its index.
func TestJobsIndexFollowsWrites(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 60*time.Second)
	const q = "indexed"
	p, err := producer.New(ctx, js, q, producer.RecordTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	put := func(id, state, kind string) {
		t.Helper()
		rec := fmt.Sprintf(`{"id":%q,"queue":%q,"kind":%q,"state":%q,"attempt":1}`, id, q, kind, state)
		if _, err := kv.Put(ctx, id, []byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(qu producer.JobQuery) []string {
		t.Helper()
		page, err := p.Jobs(ctx, qu)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range page.Jobs {
			out = append(out, j.ID+":"+string(j.State))
		}
		return out
	}
	counts := func(p *producer.Producer) map[producer.State]int {
		t.Helper()
		c, err := p.JobCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	put("a", "done", "mail")
	put("b", "dead", "mail")
	put("c", "running", "sms")
	if _, err := kv.Put(ctx, "==.seq.k", []byte(`{"key":"k","job":"c"}`)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ids(producer.JobQuery{})); got != "[c:running b:dead a:done]" {
		t.Fatalf("first page: %s", got)
	}
	// Written since: c commits (to the newest end, done), a is written again as
	// retrying, b is purged, d arrives.
	put("c", "done", "sms")
	put("a", "retrying", "mail")
	if err := kv.Purge(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	put("d", "dead", "mail")
	// Counted before any page (which would drop a record it finds gone).
	want := map[producer.State]int{producer.StateDone: 1, producer.StateRetrying: 1, producer.StateDead: 1}
	if got := counts(p); !maps.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	if got := fmt.Sprint(ids(producer.JobQuery{})); got != "[d:dead a:retrying c:done]" {
		t.Fatalf("after more writes: %s", got)
	}
	if got := fmt.Sprint(ids(producer.JobQuery{State: producer.StateDone})); got != "[c:done]" {
		t.Fatalf("done: %s", got)
	}
	if got := fmt.Sprint(ids(producer.JobQuery{Kind: "mail"})); got != "[d:dead a:retrying]" {
		t.Fatalf("kind mail: %s", got)
	}
	cold, err := producer.New(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts(cold); !maps.Equal(got, want) {
		t.Fatalf("a cold producer's counts %v, want %v", got, want)
	}

	// Past the bucket's age limit (3 s) the records are gone, and so are they from
	// the index.
	testenv.Eventually(t, 15*time.Second, "the records to expire", func() bool { return len(counts(p)) == 0 })
	if got := ids(producer.JobQuery{}); len(got) != 0 {
		t.Fatalf("after expiry: %v", got)
	}

	// The queue deleted and created again: the old index does not leak into the new.
	put("e", "done", "mail")
	if got := fmt.Sprint(ids(producer.JobQuery{})); got != "[e:done]" {
		t.Fatalf("before the queue's deletion: %s", got)
	}
	a, err := admin.New(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteQueue(ctx, q); err != nil {
		t.Fatal(err)
	}
	if _, err := producer.New(ctx, js, q, producer.RecordTTL(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if kv, err = js.KeyValue(ctx, "WORKQ_"+q+"_JOBS"); err != nil {
		t.Fatal(err)
	}
	put("f", "dead", "mail")
	if got := fmt.Sprint(ids(producer.JobQuery{})); got != "[f:dead]" {
		t.Fatalf("after the queue was made again: %s", got)
	}
}

// JobTally counts each failed attempt once, from the records' histories of failed
// attempts, whichever revision of a record shows it first.
func TestJobTallyCountsFailedAttemptsOnce(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	const q = "tallied"
	p, err := producer.New(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	put := func(id, state, errs string) {
		t.Helper()
		rec := fmt.Sprintf(`{"id":%q,"queue":%q,"state":%q,"attempt":1,"errors":[%s]}`, id, q, state, errs)
		if _, err := kv.Put(ctx, id, []byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	failed := func() uint64 {
		t.Helper()
		tally, err := p.JobTally(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tally.FailedAttempts
	}
	put("a", "retrying", `{"attempt":1,"at":"2026-11-27T00:00:00Z","error":"x"}`)
	if n := failed(); n != 1 {
		t.Fatalf("after a's first failure: %d", n)
	}
	put("a", "running", `{"attempt":1,"at":"2026-11-27T00:00:00Z","error":"x"}`) // its next claim: no new failure
	put("a", "retrying", `{"attempt":1,"at":"2026-11-27T00:00:00Z","error":"x"},{"attempt":2,"at":"2026-11-27T00:00:01Z","error":"y"}`)
	put("b", "done", `{"attempt":1,"at":"2026-11-27T00:00:00Z","error":"x"},{"attempt":2,"at":"2026-11-27T00:00:01Z","error":"y"}`)
	if n := failed(); n != 4 {
		t.Fatalf("after a's second failure and b's two: %d; want 4", n)
	}
	if n := failed(); n != 4 {
		t.Fatalf("read again with nothing new: %d; want 4", n)
	}
}
