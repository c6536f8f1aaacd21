package producer_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// uniqueEnqueue enqueues a job with unique key key and returns its JobInfo.
func uniqueEnqueue(t *testing.T, p *producer.Producer, key string, opts ...producer.EnqueueOption) producer.JobInfo {
	t.Helper()
	info, err := p.Enqueue(testenv.Context(t, 20*time.Second), []byte("x"), append([]producer.EnqueueOption{producer.Unique(key)}, opts...)...)
	if err != nil {
		t.Fatalf("Enqueue unique %s: %v", key, err)
	}
	return info
}

// Eight producers on connections of their own race to enqueue jobs with the same
// key, over several keys: for each key exactly one job is stored and accepted, and
// the seven others are duplicates naming it. Fails with the reservation's Create
// turned into a Put (every producer wins) or the holder check removed.
func TestUniqueRacingProducersOneAccepted(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	const producers, keys = 8, 5
	ps := make([]*producer.Producer, producers)
	for i := range ps {
		ps[i] = mustNew(t, env.JetStream(t), "uq")
	}
	for k := range keys {
		key := fmt.Sprintf("report-%d", k)
		infos := make([]producer.JobInfo, producers)
		errs := make([]error, producers)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				infos[i], errs[i] = p.Enqueue(testenv.Context(t, 20*time.Second), []byte("x"), producer.Unique(key))
			}()
		}
		start.Done()
		wg.Wait()
		var accepted []producer.JobInfo
		for i, err := range errs {
			if err != nil {
				t.Fatalf("key %s: producer %d: %v", key, i, err)
			}
			if !infos[i].Duplicate {
				accepted = append(accepted, infos[i])
			}
		}
		if len(accepted) != 1 {
			t.Fatalf("key %s: %d enqueues accepted, want 1: %+v", key, len(accepted), infos)
		}
		for i, info := range infos {
			if info.Duplicate && info.ID != accepted[0].ID {
				t.Errorf("key %s: producer %d's duplicate names %s, want %s", key, i, info.ID, accepted[0].ID)
			}
		}
		storedJob(t, env.JetStream(t), "uq", accepted[0].ID)
	}
	if n := streamMsgs(t, env.JetStream(t), "WORKQ_uq"); n != keys {
		t.Fatalf("%d jobs stored, want %d (one per key)", n, keys)
	}
}

// A delayed unique job holds its key while it waits: a second enqueue, delayed or
// not, is a duplicate naming it with its sequence. Fails with the schedule's subject
// left out of the holder check.
func TestUniqueDelayedJobHoldsKey(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	p := mustNew(t, env.JetStream(t), "ud", producer.UniqueGrace(time.Second))
	first := uniqueEnqueue(t, p, "nightly", producer.After(time.Hour))
	if first.Duplicate || first.ScheduledAt.IsZero() {
		t.Fatalf("first delayed enqueue: %+v", first)
	}
	time.Sleep(1500 * time.Millisecond) // past the grace: only the schedule holds the key now
	for _, opts := range [][]producer.EnqueueOption{nil, {producer.After(time.Minute)}} {
		again := uniqueEnqueue(t, p, "nightly", opts...)
		if !again.Duplicate || again.ID != first.ID || again.Sequence != first.Sequence {
			t.Fatalf("enqueue while scheduled = %+v, want a duplicate of %+v", again, first)
		}
	}
}

// A unique job waiting at another priority level holds its key past the grace too.
// Fails with the levels' subjects left out of the holder check.
func TestUniqueJobAtAnotherLevelHoldsKey(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	p := mustNew(t, env.JetStream(t), "ul", producer.UniqueGrace(time.Second))
	first := uniqueEnqueue(t, p, "page-oncall", producer.Priority(producer.PriorityUrgent))
	if first.Duplicate {
		t.Fatalf("first enqueue: %+v", first)
	}
	time.Sleep(1500 * time.Millisecond) // past the grace: only the waiting job holds the key now
	if again := uniqueEnqueue(t, p, "page-oncall"); !again.Duplicate || again.ID != first.ID || again.Sequence != first.Sequence {
		t.Fatalf("enqueue while an urgent job waits = %+v, want a duplicate of %+v", again, first)
	}
}

// A reservation whose job never came (its producer died between reserving and
// publishing) keeps the key for the grace, and is taken over after it. Fails with
// the grace ignored (taken at once) or the orphan never taken over.
func TestUniqueOrphanTakenOverAfterGrace(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const grace = 2 * time.Second
	p := mustNew(t, js, "uo", producer.UniqueGrace(grace))
	uniqueEnqueue(t, p, "other") // creates the bucket
	kv, err := js.KeyValue(testenv.Context(t, 5*time.Second), "WORKQ_uo_UNIQUE")
	if err != nil {
		t.Fatal(err)
	}
	value, _ := json.Marshal(map[string]any{"job": "ghost", "at": time.Now()})
	if _, err := kv.Create(testenv.Context(t, 5*time.Second), "k", value); err != nil {
		t.Fatal(err)
	}
	reserved := time.Now()
	got := uniqueEnqueue(t, p, "k")
	if !got.Duplicate || got.ID != "ghost" {
		t.Fatalf("enqueue within the grace = %+v, want a duplicate of ghost", got)
	}
	var taken producer.JobInfo
	testenv.Eventually(t, 10*time.Second, "the orphan's key taken over", func() bool {
		taken = uniqueEnqueue(t, p, "k")
		return !taken.Duplicate
	})
	if held := time.Since(reserved); held < grace-200*time.Millisecond {
		t.Fatalf("orphan taken over after %s, before its grace of %s", held, grace)
	}
	storedJob(t, js, "uo", taken.ID)
	e, err := kv.Get(testenv.Context(t, 5*time.Second), "k")
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Job, Takeover string }
	if err := json.Unmarshal(e.Value(), &r); err != nil || r.Job != taken.ID || r.Takeover != "" {
		t.Fatalf("key after the takeover: %s (%v), want job %s without a mark", e.Value(), err, taken.ID)
	}
}

// The jobs of a batch may be unique: the first of a key is stored, later ones with
// the key are duplicates naming it, other keys and plain jobs are not affected.
func TestUniqueBatch(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	p := mustNew(t, env.JetStream(t), "ub")
	held := uniqueEnqueue(t, p, "b")
	res, err := p.EnqueueBatch(testenv.Context(t, 20*time.Second), []producer.Job{
		{Payload: []byte("1"), Unique: "a"},
		{Payload: []byte("2"), Unique: "a"},
		{Payload: []byte("3")},
		{Payload: []byte("4"), Unique: "b"},
		{Payload: []byte("5"), Unique: "c", UniqueFor: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case res[0].Duplicate || res[2].Duplicate || res[4].Duplicate:
		t.Fatalf("new keys and plain jobs reported duplicates: %+v", res)
	case !res[1].Duplicate || res[1].ID != res[0].ID:
		t.Fatalf("second job with key a = %+v, want a duplicate of %s", res[1], res[0].ID)
	case !res[3].Duplicate || res[3].ID != held.ID || res[3].Sequence != held.Sequence:
		t.Fatalf("job with key b = %+v, want a duplicate of %+v", res[3], held)
	}
	if n := streamMsgs(t, env.JetStream(t), "WORKQ_ub"); n != 4 {
		t.Fatalf("%d jobs stored, want 4", n)
	}
}

// A server restart keeps the key: the reservation and the job are both on disk.
func TestUniqueKeyKeptAcrossRestart(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t) // file storage (in tmpfs): survives Restart
	p := mustNew(t, env.JetStream(t), "ur", producer.UniqueGrace(time.Second))
	first := uniqueEnqueue(t, p, "k")
	env.Restart(t)
	time.Sleep(1100 * time.Millisecond) // past the grace: the job itself holds the key
	again := uniqueEnqueue(t, p, "k")
	if !again.Duplicate || again.ID != first.ID {
		t.Fatalf("enqueue after the restart = %+v, want a duplicate of %+v", again, first)
	}
}

// Bad keys and keep periods are refused before anything is written; a queue whose
// jobs are not unique never gets the unique bucket.
func TestUniqueRejectsBadInput(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := mustNew(t, js, "ui")
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := p.Enqueue(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts []producer.EnqueueOption
		want error
	}{
		{[]producer.EnqueueOption{producer.Unique("a\nb")}, producer.ErrInvalidName},
		{[]producer.EnqueueOption{producer.Unique(strings.Repeat("k", 201))}, producer.ErrInvalidName},
		{[]producer.EnqueueOption{producer.UniqueFor(time.Minute)}, producer.ErrInvalidOption},
		{[]producer.EnqueueOption{producer.Unique("a"), producer.UniqueFor(-time.Second)}, producer.ErrInvalidOption},
	} {
		if _, err := p.Enqueue(ctx, nil, c.opts...); !errors.Is(err, c.want) {
			t.Errorf("Enqueue with %d options = %v, want %v", len(c.opts), err, c.want)
		}
	}
	if _, err := producer.New(ctx, js, "ui", producer.UniqueGrace(time.Millisecond)); !errors.Is(err, producer.ErrInvalidOption) {
		t.Errorf("UniqueGrace(1ms) = %v, want ErrInvalidOption", err)
	}
	if _, err := js.KeyValue(ctx, "WORKQ_ui_UNIQUE"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("unique bucket of a queue without unique jobs: %v, want none", err)
	}
}

// A unique enqueue whose reservation write gets no reply (it landed, and the link
// was cut with the reply on its way) sends it again after a bounded wait, meets its
// own reservation and goes on, instead of waiting to the end of its context: a
// unique enqueue during a failover once did (TestWritesWaitForALeader failed on a
// loaded machine). The reservation is seen stored before the link is cut, so the
// test does not guess when the request has left.
func TestUniqueReservationLostOnTheWayIsSentAgain(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	proxy := testenv.StartProxy(t, env.Server.URL())
	js := proxy.JetStream(t)
	p := mustNew(t, js, "ulost")
	ctx := testenv.Context(t, 30*time.Second)
	if _, err := p.Enqueue(ctx, nil, producer.Unique("warm")); err != nil { // the bucket exists
		t.Fatal(err)
	}
	direct, err := env.JetStream(t).KeyValue(ctx, "WORKQ_ulost_UNIQUE")
	if err != nil {
		t.Fatal(err)
	}
	proxy.PauseReplies()
	type result struct {
		info producer.JobInfo
		err  error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		info, err := p.Enqueue(ctx, []byte("x"), producer.ID("lost-1"), producer.Unique("k"))
		done <- result{info, err}
	}()
	// The reservation reaches the server; its reply waits in the proxy.
	testenv.Eventually(t, 10*time.Second, "the reservation stored", func() bool {
		_, err := direct.Get(ctx, "k")
		return err == nil
	})
	proxy.Cut() // and the reply is lost with the link
	proxy.ResumeReplies()
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the unique enqueue still waits 20 s after its reservation was lost")
	}
	if r.err != nil || r.info.Duplicate || r.info.ID != "lost-1" {
		t.Fatalf("unique enqueue after a lost reservation: %+v, %v", r.info, r.err)
	}
	t.Logf("stored %s after %s", r.info.ID, time.Since(start).Round(time.Millisecond))
	if info, err := p.Enqueue(ctx, nil, producer.ID("lost-2"), producer.Unique("k")); err != nil || !info.Duplicate || info.ID != "lost-1" {
		t.Fatalf("a second job with the key: %+v, %v; want lost-1 holding it", info, err)
	}
}
