package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// enqueueUnique enqueues a job with unique key key.
func enqueueUnique(t *testing.T, p *producer.Producer, key string, opts ...producer.EnqueueOption) producer.JobInfo {
	t.Helper()
	info, err := p.Enqueue(testenv.Context(t, 20*time.Second), []byte("x"), append([]producer.EnqueueOption{producer.Unique(key)}, opts...)...)
	if err != nil {
		t.Fatalf("Enqueue unique %s: %v", key, err)
	}
	return info
}

// uniqueValue reads key's reservation in queue q's unique bucket; found is false if
// the key is free.
func uniqueValue(t *testing.T, js jetstream.JetStream, q, key string) (r struct{ Job, Takeover string }, found bool) {
	t.Helper()
	ctx := testenv.Context(t, 5*time.Second)
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_UNIQUE")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return r, false
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		t.Fatal(err)
	}
	return r, true
}

// reserve writes key's reservation for job as a producer would, without its job.
func reserve(t *testing.T, js jetstream.JetStream, q, key string, value map[string]any) {
	t.Helper()
	ctx := testenv.Context(t, 5*time.Second)
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_UNIQUE")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(value)
	if _, err := kv.Create(ctx, key, b); err != nil {
		t.Fatal(err)
	}
}

// publishUnique publishes job id with unique key key as a producer's late publish
// would land.
func publishUnique(t *testing.T, js jetstream.JetStream, q, id, key string) {
	t.Helper()
	msg := &nats.Msg{Subject: "workq." + q + ".jobs." + id, Data: []byte(id), Header: nats.Header{}}
	msg.Header.Set("Nats-Msg-Id", id)
	msg.Header.Set("Workq-Unique", key)
	if _, err := js.PublishMsg(testenv.Context(t, 5*time.Second), msg); err != nil {
		t.Fatal(err)
	}
}

// gate is a handler whose runs each wait for the test: started receives the job id
// and attempt of each run as it starts, and each run returns what the test sends on
// finish, or nil once the test ends.
type gate struct {
	started chan [2]any
	finish  chan error
	ended   chan struct{}
}

// runGated runs w, whose handler is g, until the test ends; the gate opens first, so
// that the worker's stop does not wait out its drain timeout on a held run.
func runGated(t *testing.T, w *consumer.Worker, g *gate) *consumer.Worker {
	runWorker(t, w)
	t.Cleanup(func() { close(g.ended) })
	return w
}

func newGate() *gate {
	return &gate{started: make(chan [2]any, 16), finish: make(chan error), ended: make(chan struct{})}
}

func (g *gate) Handle(ctx context.Context, j *consumer.Job) error {
	g.started <- [2]any{j.ID(), j.Attempt()}
	select {
	case err := <-g.finish:
		return err
	case <-g.ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) awaitStart(t *testing.T) [2]any {
	t.Helper()
	select {
	case s := <-g.started:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("no run started within 20s")
		return [2]any{}
	}
}

// A unique job holds its key while it waits, runs, waits for its retry and runs
// again; once it is done its worker releases the key and the next job with it is
// accepted. Fails with the holder check removed (the second enqueue is accepted
// while the first waits) or the release removed (the key stays in the bucket).
func TestUniqueKeyHeldUntilDone(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "uk", producer.UniqueGrace(time.Second))
	first := enqueueUnique(t, p, "k")
	time.Sleep(1100 * time.Millisecond) // past the grace: the job itself must hold the key
	expectDuplicate := func(when string) {
		t.Helper()
		if got := enqueueUnique(t, p, "k"); !got.Duplicate || got.ID != first.ID {
			t.Fatalf("enqueue while the job is %s = %+v, want a duplicate of %s", when, got, first.ID)
		}
	}
	expectDuplicate("queued")

	g := newGate()
	runGated(t, newWorker(t, js, "uk", g, consumer.Backoff(func(int) time.Duration { return 2 * time.Second })), g)
	g.awaitStart(t)
	expectDuplicate("running")
	g.finish <- errors.New("try again")
	testenv.Eventually(t, 10*time.Second, "the job retrying", func() bool { return status(t, p, first.ID).State == producer.StateRetrying })
	expectDuplicate("retrying")
	g.awaitStart(t)
	expectDuplicate("running again")
	g.finish <- nil
	testenv.Eventually(t, 10*time.Second, "the key released", func() bool {
		_, held := uniqueValue(t, js, "uk", "k")
		return !held
	})
	if st := status(t, p, first.ID).State; st != producer.StateDone {
		t.Fatalf("job %s is %s after its key was released, want done", first.ID, st)
	}
	if next := enqueueUnique(t, p, "k"); next.Duplicate {
		t.Fatalf("enqueue after the job was done = %+v, want accepted", next)
	}
}

// UniqueFor keeps the key held after the job is done, and frees it after the keep
// period. Fails with the keep ignored by the producer (accepted at once).
func TestUniqueForKeepsKeyAfterDone(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "uf", producer.UniqueGrace(time.Second))
	const keep = 3 * time.Second
	first := enqueueUnique(t, p, "k", producer.UniqueFor(keep))
	runWorker(t, newWorker(t, js, "uf", consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil })))
	testenv.Eventually(t, 10*time.Second, "the job done", func() bool { return status(t, p, first.ID).State == producer.StateDone })
	finished := status(t, p, first.ID).FinishedAt
	if got := enqueueUnique(t, p, "k", producer.UniqueFor(keep)); !got.Duplicate || got.ID != first.ID {
		t.Fatalf("enqueue within the keep period = %+v, want a duplicate of %s", got, first.ID)
	}
	testenv.Eventually(t, 15*time.Second, "the key free after its keep period", func() bool {
		return !enqueueUnique(t, p, "k").Duplicate
	})
	if held := time.Since(finished); held < keep-500*time.Millisecond {
		t.Fatalf("key free %s after the job was done, before its keep period of %s", held, keep)
	}
}

// An unfenced worker writes no record for a job done on its first run: the keep
// period then rests on the end its worker wrote into the key. Fails with the release
// left out of the unfenced path (the key, past the grace, looks like an orphan's).
func TestUniqueForUnfenced(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "un", producer.UniqueGrace(time.Second))
	first := enqueueUnique(t, p, "k", producer.UniqueFor(time.Minute))
	w := newWorker(t, js, "un", consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }), consumer.Unfenced())
	runWorker(t, w)
	testenv.Eventually(t, 10*time.Second, "the job done", func() bool { return w.Stats().Committed == 1 })
	time.Sleep(1100 * time.Millisecond) // past the grace
	if got := enqueueUnique(t, p, "k"); !got.Duplicate || got.ID != first.ID {
		t.Fatalf("enqueue within the keep period = %+v, want a duplicate of %s", got, first.ID)
	}
}

// A job stored after its reservation was taken over as an orphan's (its producer's
// publish came late) never runs: its worker finds the key held by the job that took
// it, and cancels it. Fails with the worker's key check removed (both run).
func TestUniqueLateJobDroppedUnrun(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const grace = time.Second
	p := newProducer(t, js, "ul", producer.UniqueGrace(grace))
	enqueueUnique(t, p, "other") // creates the bucket
	reserve(t, js, "ul", "k", map[string]any{"job": "late", "at": time.Now()})
	time.Sleep(grace + 100*time.Millisecond)
	taker := enqueueUnique(t, p, "k")
	if taker.Duplicate {
		t.Fatalf("enqueue past the orphan's grace = %+v, want accepted", taker)
	}
	g := newGate()
	w := runGated(t, newWorker(t, js, "ul", g), g)
	ran := map[string]bool{}
	for range 2 { // "other" and the taker
		ran[g.awaitStart(t)[0].(string)] = true
	}
	publishUnique(t, js, "ul", "late", "k")
	testenv.Eventually(t, 10*time.Second, "the late job cancelled", func() bool {
		r, err := p.Status(testenv.Context(t, 5*time.Second), "late")
		return err == nil && r.State == producer.StateCancelled
	})
	select {
	case s := <-g.started:
		t.Fatalf("run %v started, want the late job dropped unrun", s)
	default:
	}
	if !ran[taker.ID] || w.Stats().UniqueDropped != 1 {
		t.Fatalf("runs %v, dropped %d; want the taker %s run and the late job dropped", ran, w.Stats().UniqueDropped, taker.ID)
	}
}

// A worker about to run a unique job clears a producer's takeover mark on its key,
// so that the takeover's final compare-and-set fails and the job keeps the key.
// Fails with the mark left in place.
func TestUniqueWorkerClearsTakeoverMark(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "um")
	enqueueUnique(t, p, "other") // creates the bucket
	reserve(t, js, "um", "k", map[string]any{"job": "slow", "at": time.Now(), "takeover": "taker"})
	g := newGate()
	runGated(t, newWorker(t, js, "um", g), g)
	g.awaitStart(t) // "other"
	publishUnique(t, js, "um", "slow", "k")
	if s := g.awaitStart(t); s[0] != "slow" {
		t.Fatalf("run of %v, want slow", s)
	}
	if r, held := uniqueValue(t, js, "um", "k"); !held || r.Job != "slow" || r.Takeover != "" {
		t.Fatalf("key while slow runs: %+v (held %v), want held by slow without a mark", r, held)
	}
}

// The keep period holds when the worker's end-of-job write to the key was lost: the
// producer reads the job's end from its record. Fails with the record's end ignored.
func TestUniqueForFromRecord(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "uy", producer.UniqueGrace(time.Second))
	first := enqueueUnique(t, p, "k", producer.UniqueFor(time.Minute))
	runWorker(t, newWorker(t, js, "uy", consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil })))
	testenv.Eventually(t, 10*time.Second, "the job done", func() bool { return status(t, p, first.ID).State == producer.StateDone })
	// As if the worker's write had been lost: the key as its producer wrote it.
	kv, err := js.KeyValue(testenv.Context(t, 5*time.Second), "WORKQ_uy_UNIQUE")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"job": first.ID, "at": time.Now(), "keep": 60})
	if _, err := kv.Put(testenv.Context(t, 5*time.Second), "k", b); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // past the grace
	if got := enqueueUnique(t, p, "k"); !got.Duplicate || got.ID != first.ID {
		t.Fatalf("enqueue within the keep period = %+v, want a duplicate of %s", got, first.ID)
	}
}

// A unique job that dies releases its key as a done one does. Fails with the
// release left out of the dead-letter path.
func TestUniqueKeyReleasedWhenDead(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "ux")
	first := enqueueUnique(t, p, "k")
	runWorker(t, newWorker(t, js, "ux", consumer.HandlerFunc(func(context.Context, *consumer.Job) error {
		return consumer.Permanent(errors.New("no"))
	})))
	testenv.Eventually(t, 10*time.Second, "the key released", func() bool {
		_, held := uniqueValue(t, js, "ux", "k")
		return !held
	})
	if st := status(t, p, first.ID).State; st != producer.StateDead {
		t.Fatalf("job %s is %s after its key was released, want dead", first.ID, st)
	}
}

// A unique key header that is no key's token (internal/wireid; "a b" set raw by
// another client) makes the job malformed: it is dead-lettered without running.
func TestUniqueBadKeyDeadLettered(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "ubk")
	var runs atomic.Int64
	runWorker(t, newWorker(t, js, "ubk", consumer.HandlerFunc(func(context.Context, *consumer.Job) error { runs.Add(1); return nil })))
	publishUnique(t, js, "ubk", "bad", "a b")
	testenv.Eventually(t, 10*time.Second, "the job dead", func() bool {
		r, err := p.Status(testenv.Context(t, 5*time.Second), "bad")
		return err == nil && r.State == producer.StateDead
	})
	if n := runs.Load(); n != 0 {
		t.Fatalf("the job ran %d times, want never", n)
	}
}

// On a replicated queue (R3) the reservation and its checks work alike: the bucket
// is created with the queue's replicas and without direct gets, and the second
// enqueue is a duplicate; once the job is done, the key is free. Fails with the
// bucket's direct gets left on (checked on its configuration).
func TestUniqueReplicated(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, 3)
	js := cl.JetStream(t)
	p := newProducer(t, js, "urep", producer.Replicas(3))
	first := enqueueUnique(t, p, "k")
	if again := enqueueUnique(t, p, "k"); !again.Duplicate || again.ID != first.ID {
		t.Fatalf("second enqueue = %+v, want a duplicate of %s", again, first.ID)
	}
	s, err := js.Stream(testenv.Context(t, 10*time.Second), "KV_WORKQ_urep_UNIQUE")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.CachedInfo().Config; cfg.Replicas != 3 || cfg.AllowDirect || !cfg.AllowMsgTTL {
		t.Fatalf("unique bucket: %d replicas, direct gets %v, per-key TTL %v; want 3, off, on", cfg.Replicas, cfg.AllowDirect, cfg.AllowMsgTTL)
	}
	runWorker(t, newWorker(t, js, "urep", consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }), consumer.Replicas(3)))
	testenv.Eventually(t, 20*time.Second, "the key free after the job", func() bool {
		return !enqueueUnique(t, p, "k").Duplicate
	})
}
