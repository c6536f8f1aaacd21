package groupcommit

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/testenv"
)

// bucket creates a KV bucket whose stream takes atomic publishes (or not).
func bucket(t *testing.T, js jetstream.JetStream, name string, atomic bool) jetstream.KeyValue {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	if atomic {
		s, err := js.Stream(ctx, "KV_"+name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.AllowAtomicPublish = true
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return kv
}

// start starts a server with a bucket for the test and a writer that batches any two
// publishes, one send at a time.
func start(t *testing.T, name string, atomic bool) (context.Context, jetstream.KeyValue, *Writer) {
	t.Helper()
	js := testenv.Start(t).JetStream(t)
	return testenv.Context(t, 20*time.Second), bucket(t, js, name, atomic), New(js, Config{MinBatch: 2, MaxBatch: 100, MaxInflight: 1})
}

// cas is a compare-and-set write of value to key over revision rev.
func cas(bucket, key string, rev uint64, value string) *nats.Msg {
	return &nats.Msg{
		Subject: "$KV." + bucket + "." + key,
		Data:    []byte(value),
		Header:  nats.Header{jetstream.ExpectedLastSubjSeqHeader: []string{strconv.FormatUint(rev, 10)}},
	}
}

// goAll queues msgs at once, so that they leave in as few sends as the writer's
// configuration allows: the way publishes that pile up under load are sent.
func goAll(ctx context.Context, w *Writer, msgs []*nats.Msg) []*Publish {
	ctxs := make([]context.Context, len(msgs))
	for i := range ctxs {
		ctxs[i] = ctx
	}
	return goEach(ctxs, w, msgs)
}

func wait(t *testing.T, p *Publish) (*jetstream.PubAck, error) {
	t.Helper()
	select {
	case ack := <-p.Ok():
		return ack, nil
	case err := <-p.Err():
		return nil, err
	case <-time.After(20 * time.Second):
		t.Fatal("publish not settled in 20s")
		return nil, nil
	}
}

// Publishes that queue up together are stored by one atomic batch, each with its
// own revision: the sequence the stream gave it, as a read of the key shows.
func TestQueuedPublishesShareABatch(t *testing.T) {
	t.Parallel()
	ctx, kv, w := start(t, "GC_BATCH", true)
	var msgs []*nats.Msg
	for i := range 40 {
		msgs = append(msgs, cas("GC_BATCH", "k"+strconv.Itoa(i), 0, "v"+strconv.Itoa(i)))
	}
	ps := goAll(ctx, w, msgs)
	for i, p := range ps {
		ack, err := wait(t, p)
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		e, err := kv.Get(ctx, "k"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if e.Revision() != ack.Sequence || string(e.Value()) != "v"+strconv.Itoa(i) {
			t.Fatalf("key k%d: revision %d value %q; the ack said revision %d", i, e.Revision(), e.Value(), ack.Sequence)
		}
	}
	if st := w.Stats(); st.Batches != 1 || st.Batched != 40 || st.Fallbacks != 0 {
		t.Fatalf("stats %+v: want the 40 publishes in one batch", st)
	}
}

// A batch with one compare-and-set that lost is refused whole by the server; the
// writer sends its publishes again one by one, so the others are stored and only
// the stale one fails, as a conflict.
func TestStaleWriteInABatchFailsAlone(t *testing.T) {
	t.Parallel()
	ctx, kv, w := start(t, "GC_STALE", true)
	revs := make([]uint64, 10)
	for i := range revs {
		rev, err := kv.Create(ctx, "k"+strconv.Itoa(i), []byte("claimed"))
		if err != nil {
			t.Fatal(err)
		}
		revs[i] = rev
	}
	// Key 3 is claimed again by someone else: a write over the old revision is stale.
	if _, err := kv.Update(ctx, "k3", []byte("reclaimed"), revs[3]); err != nil {
		t.Fatal(err)
	}
	var msgs []*nats.Msg
	for i, rev := range revs {
		msgs = append(msgs, cas("GC_STALE", "k"+strconv.Itoa(i), rev, "done"))
	}
	ps := goAll(ctx, w, msgs)
	for i, p := range ps {
		_, err := wait(t, p)
		e, gerr := kv.Get(ctx, "k"+strconv.Itoa(i))
		if gerr != nil {
			t.Fatal(gerr)
		}
		switch {
		case i == 3 && !jserr.IsConflict(err):
			t.Fatalf("stale write: %v, want a conflict", err)
		case i == 3 && string(e.Value()) != "reclaimed":
			t.Fatalf("stale write landed: k3 = %q", e.Value())
		case i != 3 && err != nil:
			t.Fatalf("write %d: %v", i, err)
		case i != 3 && string(e.Value()) != "done":
			t.Fatalf("k%d = %q, want done", i, e.Value())
		}
	}
	if st := w.Stats(); st.Fallbacks != 1 || st.Batches != 0 {
		t.Fatalf("stats %+v: want one refused batch, sent again one by one", st)
	}
}

// A batch holding a message id the stream has seen is refused whole; sent again one
// by one, the duplicate is acknowledged as a duplicate and the rest are stored.
func TestDuplicateInABatchIsReportedAsSuch(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "GC_DUP", Subjects: []string{"gc.dup.>"}, AllowAtomicPublish: true})
	if err != nil {
		t.Fatal(err)
	}
	msg := func(id string) *nats.Msg {
		return &nats.Msg{Subject: "gc.dup." + id, Data: []byte(id), Header: nats.Header{jetstream.MsgIDHeader: []string{id}}}
	}
	first, err := js.PublishMsg(ctx, msg("j2"))
	if err != nil {
		t.Fatal(err)
	}
	w := New(js, Config{MinBatch: 2, MaxBatch: 100, MaxInflight: 1})
	ps := goAll(ctx, w, []*nats.Msg{msg("j1"), msg("j2"), msg("j3")})
	for i, p := range ps {
		ack, err := wait(t, p)
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if dup := i == 1; ack.Duplicate != dup || (dup && ack.Sequence != first.Sequence) {
			t.Fatalf("publish %d: ack %+v; want duplicate=%v", i, ack, dup)
		}
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 3 {
		t.Fatalf("stream holds %v messages (%v), want 3", info.State.Msgs, err)
	}
	if st := w.Stats(); st.Fallbacks != 1 {
		t.Fatalf("stats %+v: want the batch refused once", st)
	}
}

// A stream that takes no atomic publishes refuses the first batch; the writer then
// sends everything one by one, and stops trying batches.
func TestStreamWithoutAtomicPublishGetsSingleWrites(t *testing.T) {
	t.Parallel()
	ctx, kv, w := start(t, "GC_PLAIN", false)
	for round := range 2 {
		var msgs []*nats.Msg
		for i := range 5 {
			msgs = append(msgs, cas("GC_PLAIN", "r"+strconv.Itoa(round)+"k"+strconv.Itoa(i), 0, "v"))
		}
		for i, p := range goAll(ctx, w, msgs) {
			if _, err := wait(t, p); err != nil {
				t.Fatalf("round %d publish %d: %v", round, i, err)
			}
		}
	}
	if st, _ := kv.Status(ctx); st.Values() != 10 {
		t.Fatalf("bucket holds %d values, want 10", st.Values())
	}
	if st := w.Stats(); st.Fallbacks != 1 || st.Batches != 0 {
		t.Fatalf("stats %+v: want one refused batch, then none tried", st)
	}
}

// A publish whose context ended while it waited in the queue is not sent.
func TestEndedContextIsNotSent(t *testing.T) {
	t.Parallel()
	ctx, kv, w := start(t, "GC_CTX", true)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	ps := goAll(ended, w, []*nats.Msg{cas("GC_CTX", "a", 0, "v")})
	for _, p := range ps {
		if _, err := wait(t, p); !errors.Is(err, context.Canceled) {
			t.Fatalf("publish with an ended context: %v, want context.Canceled", err)
		}
	}
	if _, err := w.PublishMsg(ctx, cas("GC_CTX", "c", 0, "v")); err != nil {
		t.Fatal(err)
	}
	if st, _ := kv.Status(ctx); st.Values() != 1 {
		t.Fatalf("bucket holds %d values, want only the live publish's", st.Values())
	}
}

// A reply lost with the server (here: the link stops forwarding) settles the
// publishes that waited for it with nats.ErrTimeout after the writer's timeout, long
// before their own deadlines, so the send slot is free for what comes next.
func TestLostReplyTimesOutAndFreesTheSlot(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	px := testenv.StartProxy(t, env.URL())
	js := px.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	bucket(t, env.JetStream(t), "GC_LOST", true)
	w := New(js, Config{MinBatch: 2, MaxBatch: 100, MaxInflight: 1, Timeout: 300 * time.Millisecond})
	px.Pause()
	start := time.Now()
	batch := goAll(ctx, w, []*nats.Msg{cas("GC_LOST", "a", 0, "v"), cas("GC_LOST", "b", 0, "v")})
	single := w.Go(ctx, cas("GC_LOST", "c", 0, "v"))
	for _, p := range append(batch, single) {
		if _, err := wait(t, p); !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("publish with its reply lost: %v, want nats.ErrTimeout", err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("lost replies settled after %s; the writer's timeout is 300ms", d)
	}
	px.Resume()
	if _, err := w.PublishMsg(ctx, cas("GC_LOST", "d", 0, "v")); err != nil {
		t.Fatalf("publish after the link is back: %v", err)
	}
}

// A caller's message may be in two sends at once (a producer resends it when its
// own wait ended first). The writer puts the batch headers on copies: the caller's
// message is never written to, so the race detector finds nothing and the message
// comes back as it was given.
func TestCallersMessageIsNeverWritten(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	bucket(t, js, "GC_SHARED", true)
	w := New(js, Config{MinBatch: 2, MaxBatch: 100, MaxInflight: 8})
	msgs := make([]*nats.Msg, 50)
	for i := range msgs {
		msgs[i] = &nats.Msg{Subject: "$KV.GC_SHARED.k" + strconv.Itoa(i), Data: []byte("v"), Header: nats.Header{"Team": []string{"a"}}}
	}
	var ps []*Publish
	for range 2 { // every message queued twice, as a resend would
		ps = append(ps, goAll(ctx, w, msgs)...)
	}
	for _, p := range ps {
		select {
		case <-p.Ok():
		case err := <-p.Err():
			t.Fatalf("publish: %v", err)
		}
	}
	if w.Stats().Batches == 0 {
		t.Fatal("nothing went out in a batch: the test shows nothing")
	}
	for _, m := range msgs {
		if len(m.Header) != 1 || m.Header.Get("Team") != "a" {
			t.Fatalf("the caller's message came back with headers %v", m.Header)
		}
	}
}

// Each publish in a batch keeps its own deadline: while the reply is slow (the link
// stalls for a second and a half), the publish whose context ends after 300 ms gets
// its context's error alone, and gives the send slot back; the others, whose
// contexts allow more, wait off the slot and get their acks when the reply comes.
// Fails with the batch bounded by its earliest deadline (every publish in it fails
// with that deadline), and with the slot held until the reply.
func TestEachPublishInABatchKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	px := testenv.StartProxy(t, env.URL())
	js := px.JetStream(t)
	long := testenv.Context(t, 30*time.Second)
	bucket(t, env.JetStream(t), "GC_DEADLINE", true)
	w := New(js, Config{MinBatch: 2, MaxBatch: 100, MaxInflight: 1, Timeout: 20 * time.Second})
	short, cancel := context.WithTimeout(long, 300*time.Millisecond)
	defer cancel()
	px.Pause()
	ps := goEach([]context.Context{long, short, long}, w,
		[]*nats.Msg{cas("GC_DEADLINE", "k0", 0, "v"), cas("GC_DEADLINE", "k1", 0, "v"), cas("GC_DEADLINE", "k2", 0, "v")})
	if _, err := wait(t, ps[1]); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the publish with the short deadline: %v, want its context's deadline", err)
	}
	testenv.Eventually(t, 5*time.Second, "the send slot given back", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.inflight == 0
	})
	time.Sleep(time.Second) // the reply stays late past that deadline
	px.Resume()
	for _, i := range []int{0, 2} {
		if ack, err := wait(t, ps[i]); err != nil || ack.Sequence == 0 {
			t.Fatalf("publish %d, whose context allows more: %v, %v; want it stored", i, ack, err)
		}
	}
	if st := w.Stats(); st.Batches != 1 || st.Batched != 3 {
		t.Fatalf("stats %+v: want the three in one batch", st)
	}
}

// goEach queues msgs at once as goAll does, each with its own context.
func goEach(ctxs []context.Context, w *Writer, msgs []*nats.Msg) []*Publish {
	ps := make([]*Publish, len(msgs))
	w.mu.Lock()
	for i, m := range msgs {
		ps[i] = &Publish{ctx: ctxs[i], msg: m, ok: make(chan *jetstream.PubAck, 1), errc: make(chan error, 1)}
		w.queue = append(w.queue, ps[i])
	}
	w.startLocked()
	w.mu.Unlock()
	return ps
}
