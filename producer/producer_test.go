package producer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/badinput"
	"github.com/workq/workq/kvlock"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// ---- helpers ----

func mustNew(t *testing.T, js jetstream.JetStream, q string, opts ...producer.Option) *producer.Producer {
	t.Helper()
	p, err := producer.New(testenv.Context(t, 20*time.Second), js, q, opts...)
	if err != nil {
		t.Fatalf("producer.New(%q): %v", q, err)
	}
	return p
}

func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(testenv.Context(t, 10*time.Second), stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(testenv.Context(t, 10*time.Second))
	if err != nil {
		t.Fatalf("stream %s info: %v", stream, err)
	}
	return info.State.Msgs
}

func storedJob(t *testing.T, js jetstream.JetStream, q, id string) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := js.Stream(testenv.Context(t, 10*time.Second), "WORKQ_"+q)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(testenv.Context(t, 10*time.Second), "workq."+q+".jobs."+id)
	if err != nil {
		t.Fatalf("stored job %s: %v", id, err)
	}
	return m
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// ---- New ----

func TestNewRejectsInvalidQueueNames(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	for _, q := range []string{"", "a.b", "a*", "a b", ">", "a>", "é", strings.Repeat("a", 65)} {
		p, err := producer.New(testenv.Context(t, 5*time.Second), js, q)
		if !errors.Is(err, producer.ErrInvalidName) || p != nil {
			t.Errorf("New(%q) = %v, %v; want ErrInvalidName", q, p, err)
		}
	}
	// Nothing was created for them.
	n := 0
	for range js.StreamNames(testenv.Context(t, 5*time.Second)).Name() {
		n++
	}
	if n != 0 {
		t.Errorf("%d streams exist after rejected names", n)
	}
	// The longest valid name works end to end.
	long := strings.Repeat("q", 64)
	p := mustNew(t, js, long)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("x"), producer.ID("j")); err != nil {
		t.Fatalf("enqueue on a 64-character queue: %v", err)
	}
}

func TestNewIsIdempotent(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p1 := mustNew(t, js, "idem")
	if _, err := p1.Enqueue(testenv.Context(t, 5*time.Second), []byte("x"), producer.ID("a")); err != nil {
		t.Fatal(err)
	}
	before, err := js.Stream(testenv.Context(t, 5*time.Second), "WORKQ_idem")
	if err != nil {
		t.Fatal(err)
	}
	created := before.CachedInfo().Created
	p2 := mustNew(t, js, "idem")
	if p2.Queue() != "idem" {
		t.Fatalf("Queue() = %q", p2.Queue())
	}
	// Concurrent provisioning races are fine too.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := producer.New(testenv.Context(t, 10*time.Second), js, "idem")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent New: %v", err)
		}
	}
	w, err := consumer.New(testenv.Context(t, 10*time.Second), js, "idem",
		consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }), consumer.Logger(quietLog))
	if err != nil || w == nil {
		t.Fatalf("consumer.New after producers: %v", err)
	}
	after, err := js.Stream(testenv.Context(t, 5*time.Second), "WORKQ_idem")
	if err != nil {
		t.Fatal(err)
	}
	if !after.CachedInfo().Created.Equal(created) {
		t.Fatalf("stream was recreated: created %v then %v", created, after.CachedInfo().Created)
	}
	if n := after.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("stream has %d messages after re-provisioning, want 1", n)
	}
	var names []string
	for n := range js.StreamNames(testenv.Context(t, 5*time.Second)).Name() {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"KV_WORKQ_idem_JOBS", "WORKQ_idem", "WORKQ_idem_DEAD"}
	if !slices.Equal(names, want) {
		t.Fatalf("streams %v, want %v", names, want)
	}
}

func TestNewRefusesIncompatibleStream(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	cfg := jetstream.StreamConfig{
		Name:      "WORKQ_x",
		Subjects:  []string{"workq.x.jobs", "workq.x.jobs.>"},
		Retention: jetstream.LimitsPolicy,
		Storage:   jetstream.MemoryStorage,
	}
	s, err := js.CreateStream(testenv.Context(t, 5*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(testenv.Context(t, 5*time.Second), "workq.x.jobs", []byte("keep me")); err != nil {
		t.Fatal(err)
	}
	before, err := s.Info(testenv.Context(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(testenv.Context(t, 10*time.Second), js, "x")
	if !errors.Is(err, producer.ErrIncompatible) || p != nil {
		t.Fatalf("New over a Limits stream = %v, %v; want ErrIncompatible", p, err)
	}
	if !strings.Contains(err.Error(), "WORKQ_x") || !strings.Contains(strings.ToLower(err.Error()), "retention") {
		t.Errorf("error does not say what is wrong with what: %v", err)
	}
	after, err := s.Info(testenv.Context(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if after.Config.Retention != jetstream.LimitsPolicy || !slices.Equal(after.Config.Subjects, before.Config.Subjects) ||
		after.Config.Storage != before.Config.Storage || after.State.Msgs != 1 || !after.Created.Equal(before.Created) {
		t.Fatalf("stream changed: before %+v %+v, after %+v %+v", before.Config, before.State, after.Config, after.State)
	}
}

// The README's first library line once asked for Replicas(3) against the quick
// start's single server: New fails at once (not at its context's end), saying the
// queue needs a cluster.
func TestNewReplicasOnSingleNodeFailsFast(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 10*time.Second)
	start := time.Now()
	p, err := producer.New(ctx, js, "emails", producer.Replicas(3))
	took := time.Since(start)
	if err == nil || p != nil {
		t.Fatalf("New with Replicas(3) on one node succeeded")
	}
	if ctx.Err() != nil || took > 5*time.Second {
		t.Fatalf("New with Replicas(3) took %s (waited for its context): %v", took, err)
	}
	if !errors.Is(err, producer.ErrNeedsCluster) {
		t.Fatalf("New with Replicas(3) on one node: %v, want ErrNeedsCluster", err)
	}
	for _, part := range []string{"queue emails", "3 replicas needs a cluster of at least 3 nodes"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error does not say %q: %v", part, err)
		}
	}
}

// ---- Enqueue ----

func TestEnqueueExplicitIDAndDuplicate(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := mustNew(t, js, "dup")
	ctx := testenv.Context(t, 10*time.Second)
	a, err := p.Enqueue(ctx, []byte("one"), producer.ID("order-42"))
	if err != nil || a.ID != "order-42" || a.Duplicate || a.Sequence == 0 {
		t.Fatalf("first Enqueue = %+v, %v", a, err)
	}
	b, err := p.Enqueue(ctx, []byte("two"), producer.ID("order-42"))
	if err != nil || b.ID != "order-42" || !b.Duplicate || b.Sequence != a.Sequence {
		t.Fatalf("second Enqueue = %+v, %v; want Duplicate with sequence %d", b, err, a.Sequence)
	}
	if n := streamMsgs(t, js, "WORKQ_dup"); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
	if m := storedJob(t, js, "dup", "order-42"); string(m.Data) != "one" {
		t.Fatalf("stored payload %q, want the first", m.Data)
	}
	// Ids are per queue in the sense of one stream per queue: another id is new.
	c, err := p.Enqueue(ctx, []byte("three"), producer.ID("order-43"))
	if err != nil || c.Duplicate || c.Sequence <= a.Sequence {
		t.Fatalf("other id = %+v, %v", c, err)
	}
}

func TestEnqueueGeneratedIDsUniqueAndSortable(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := mustNew(t, js, "gen")
	ctx := testenv.Context(t, 15*time.Second)
	const n = 300
	var ids []string
	var last uint64
	for i := range n {
		info, err := p.Enqueue(ctx, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if info.Duplicate || info.Sequence <= last || info.ID == "" {
			t.Fatalf("job %d: %+v (last sequence %d)", i, info, last)
		}
		last = info.Sequence
		ids = append(ids, info.ID)
	}
	// Concurrent producers' ids are unique as well.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				info, err := p.Enqueue(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ids = append(ids, info.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if !slices.IsSorted(ids[:n]) {
		t.Fatalf("ids generated one after another do not sort in order: %v", ids[:10])
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("id %s generated twice", id)
		}
		seen[id] = true
	}
	if got := streamMsgs(t, js, "WORKQ_gen"); got != uint64(len(ids)) {
		t.Fatalf("stream holds %d, want %d", got, len(ids))
	}
	// Generated ids sort after earlier ones across time too.
	later, err := p.Enqueue(ctx, nil)
	if err != nil || later.ID <= ids[n-1] {
		t.Fatalf("later id %q does not sort after %q (%v)", later.ID, ids[n-1], err)
	}
}

func TestEnqueueRejectsInvalidIDs(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := mustNew(t, js, "ids")
	ctx := testenv.Context(t, 10*time.Second)
	for _, id := range []string{"a\nb", "tab\there", "\xff", "del\x7f", strings.Repeat("x", 201), strings.Repeat("é", 101)} {
		info, err := p.Enqueue(ctx, []byte("x"), producer.ID(id))
		if !errors.Is(err, producer.ErrInvalidName) {
			t.Errorf("Enqueue(ID %.30q) = %+v, %v; want ErrInvalidName", id, info, err)
		}
	}
	// ID("") means "generate one": it is not an error.
	if info, err := p.Enqueue(ctx, nil, producer.ID("")); err != nil || info.ID == "" {
		t.Errorf("ID(\"\") = %+v, %v; want a generated id", info, err)
	}
	// Any other text up to 200 bytes is an id (issue 25); a 200-byte id of
	// characters that need encoding makes the longest token.
	for _, id := range []string{strings.Repeat("x", 200), "a.b", "A-Z_0=9/x", " ", "a b", ".a", "a.", "a..b", "a*", "a>", strings.Repeat("é", 100)} {
		if _, err := p.Enqueue(ctx, nil, producer.ID(id)); err != nil {
			t.Errorf("Enqueue(ID %.30q): %v", id, err)
		}
	}
	if n := streamMsgs(t, js, "WORKQ_ids"); n != 12 {
		t.Fatalf("stream holds %d messages, want 12 (only the valid ones)", n)
	}
	// Status rejects invalid ids the same way.
	if _, err := p.Status(ctx, "a\nb"); !errors.Is(err, producer.ErrInvalidName) {
		t.Errorf("Status(\"a\\nb\"): %v", err)
	}
}

func TestEnqueuePayloadTooLarge(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := mustNew(t, js, "big")
	ctx := testenv.Context(t, 10*time.Second)
	max := js.Conn().MaxPayload()
	if max <= 0 {
		t.Fatalf("MaxPayload = %d", max)
	}
	for _, size := range []int64{max + 1, max, max - 10, max - producer.DeadLetterReserve} {
		info, err := p.Enqueue(ctx, make([]byte, size), producer.ID(fmt.Sprintf("big-%d", size)))
		if !errors.Is(err, producer.ErrPayloadTooLarge) {
			t.Errorf("payload of %d bytes (max %d): %+v, %v; want ErrPayloadTooLarge", size, max, info, err)
		}
	}
	res, err := p.EnqueueBatch(ctx, []producer.Job{{ID: "b1", Payload: make([]byte, max-producer.DeadLetterReserve)}, {ID: "b2", Payload: []byte("ok")}})
	if !errors.Is(err, producer.ErrBatch) || !errors.Is(res[0].Err, producer.ErrPayloadTooLarge) || res[1].Err != nil {
		t.Errorf("batch with a too large job: %v; results %+v", err, res)
	}
	if n := streamMsgs(t, js, "WORKQ_big"); n != 1 {
		t.Fatalf("stream holds %d messages, want 1 (only the small batch job)", n)
	}
	// The largest payload that fits with workq's headers and the dead-letter reserve
	// is stored; one byte more is refused.
	id := "fits"
	hdr := len("NATS/1.0\r\n\r\n") + len("Nats-Msg-Id: "+id+"\r\n") + len("Workq-Enqueue: ") + 26 + len("\r\n")
	limit := max - producer.DeadLetterReserve - int64(hdr)
	if _, err := p.Enqueue(ctx, make([]byte, limit), producer.ID(id)); err != nil {
		t.Fatalf("payload of max-reserve-headers = %d bytes: %v", limit, err)
	}
	if _, err := p.Enqueue(ctx, make([]byte, limit+1), producer.ID(id+"2")); !errors.Is(err, producer.ErrPayloadTooLarge) {
		t.Fatalf("payload one byte over: %v", err)
	}
}

// A negative After is a mistake, not "at once": refused with ErrInvalidOption, and
// nothing is stored; After(0) runs at once (issue 25).
func TestEnqueueNegativeAfterRefused(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := mustNew(t, js, "negafter")
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("neg"), producer.After(-5*time.Second)); !errors.Is(err, producer.ErrInvalidOption) ||
		!strings.Contains(err.Error(), "After") {
		t.Fatalf("After(-5s): %v, want ErrInvalidOption naming After", err)
	}
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("now"), producer.After(0)); err != nil {
		t.Fatalf("After(0): %v", err)
	}
	if n := streamMsgs(t, js, "WORKQ_negafter"); n != 1 {
		t.Fatalf("stream holds %d, want 1 (not the refused job)", n)
	}
	if r, err := p.Status(ctx, "now"); err != nil || r.State != producer.StateQueued {
		t.Fatalf("After(0) job: %+v, %v; want queued to run at once", r, err)
	}
}

func TestEnqueueHeaders(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := mustNew(t, js, "hdr")
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("neg"), producer.MaxAttempts(-1)); err == nil {
		t.Fatal("MaxAttempts(-1) accepted")
	}
	if _, err := p.Enqueue(ctx, []byte("payload"), producer.ID("h1"), producer.Kind("send_email"),
		producer.Header("X-Tenant", "acme"), producer.Header("X-Tenant", "second"), producer.MaxAttempts(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("plain"), producer.ID("h2")); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, js, "WORKQ_hdr"); n != 2 {
		t.Fatalf("stream holds %d, want 2 (the MaxAttempts(-1) job must not be stored)", n)
	}
	m := storedJob(t, js, "hdr", "h1")
	if m.Subject != "workq.hdr.jobs.h1" || string(m.Data) != "payload" {
		t.Fatalf("stored %s %q", m.Subject, m.Data)
	}
	for k, want := range map[string]string{"Nats-Msg-Id": "h1", "Workq-Kind": "send_email", "Workq-Max-Attempts": "3"} {
		if got := m.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q (all: %v)", k, got, want, m.Header)
		}
	}
	if got := m.Header.Values("X-Tenant"); !slices.Equal(got, []string{"acme", "second"}) {
		t.Errorf("X-Tenant = %v", got)
	}
	m2 := storedJob(t, js, "hdr", "h2")
	if m2.Header.Get("Nats-Msg-Id") != "h2" || m2.Header.Get("Workq-Kind") != "" || m2.Header.Get("Workq-Max-Attempts") != "" {
		t.Errorf("plain job headers: %v", m2.Header)
	}
	// Every enqueue carries an enqueue id of its own, whatever the caller set.
	e1, e2 := m.Header.Get("Workq-Enqueue"), m2.Header.Get("Workq-Enqueue")
	if len(e1) != 26 || len(e2) != 26 || e1 == e2 {
		t.Errorf("enqueue ids %q and %q: want two different ids", e1, e2)
	}
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("h4"), producer.Header("Workq-Enqueue", "mine")); err != nil {
		t.Fatal(err)
	}
	if e := storedJob(t, js, "hdr", "h4").Header.Values("Workq-Enqueue"); len(e) != 1 || len(e[0]) != 26 {
		t.Errorf("enqueue id %q over the caller's", e)
	}
	// Status reports what the headers say.
	r, err := p.Status(ctx, "h1")
	if err != nil || r.State != producer.StateQueued || r.Kind != "send_email" || r.MaxAttempts != 3 || r.Sequence != m.Sequence || r.Enqueue != e1 {
		t.Fatalf("Status(h1) = %+v, %v", r, err)
	}
	// A batch job's fields set the same headers.
	if _, err := p.EnqueueBatch(ctx, []producer.Job{{ID: "h3", Kind: "k3", MaxAttempts: 7, Header: nats.Header{"X-A": {"b"}}}}); err != nil {
		t.Fatal(err)
	}
	m3 := storedJob(t, js, "hdr", "h3")
	if m3.Header.Get("Workq-Kind") != "k3" || m3.Header.Get("Workq-Max-Attempts") != "7" || m3.Header.Get("X-A") != "b" || m3.Header.Get("Nats-Msg-Id") != "h3" {
		t.Errorf("batch job headers: %v", m3.Header)
	}
	if _, err := p.EnqueueBatch(ctx, []producer.Job{{ID: "h4", MaxAttempts: -2}}); !errors.Is(err, producer.ErrBatch) {
		t.Errorf("batch job with MaxAttempts -2: %v", err)
	}
}

// ---- EnqueueBatch ----

func TestEnqueueBatchLarge(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := mustNew(t, js, "batch", producer.MaxInFlight(64))
	const n = 5000
	jobs := make([]producer.Job, n)
	for i := range jobs {
		jobs[i] = producer.Job{ID: fmt.Sprintf("j-%05d", i), Payload: []byte(fmt.Sprint(i))}
	}
	jobs[10].ID = "" // generated
	// Sample the client's async pending count while the batch runs: the window must hold.
	maxPending := sampleMaxPending(js, 100*time.Microsecond)
	start := time.Now()
	res, err := p.EnqueueBatch(testenv.Context(t, 30*time.Second), jobs)
	took := time.Since(start)
	seen := maxPending()
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	if len(res) != n {
		t.Fatalf("%d results for %d jobs", len(res), n)
	}
	var last uint64
	for i, r := range res {
		if r.Err != nil || r.Duplicate || r.Sequence <= last {
			t.Fatalf("result %d: %+v (previous sequence %d)", i, r, last)
		}
		if i != 10 && r.ID != jobs[i].ID {
			t.Fatalf("result %d has id %q, want %q", i, r.ID, jobs[i].ID)
		}
		last = r.Sequence
	}
	if res[10].ID == "" {
		t.Fatal("generated id not reported")
	}
	if got := streamMsgs(t, js, "WORKQ_batch"); got != n {
		t.Fatalf("stream holds %d, want %d", got, n)
	}
	if seen > 64 {
		t.Fatalf("saw %d publishes awaiting acks with MaxInFlight(64)", seen)
	}
	t.Logf("%d jobs in %s; max pending seen %d", n, took, seen)
}

// sampleMaxPending samples js's count of asynchronous publishes awaiting their
// acknowledgement every interval, until the function it returns is called; that
// function stops the sampling and returns the highest count seen.
func sampleMaxPending(js jetstream.JetStream, every time.Duration) func() int64 {
	var highest atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if v := int64(js.PublishAsyncPending()); v > highest.Load() {
				highest.Store(v)
			}
			time.Sleep(every)
		}
	}()
	return func() int64 {
		close(stop)
		<-sampled
		return highest.Load()
	}
}

func TestEnqueueBatchMixedValidity(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := mustNew(t, js, "mixed")
	ids := []string{"ok-1", "a\nb", "ok-2", "\xffbad", "ok-3", "a\x00b", strings.Repeat("z", 201), "ok-4"}
	invalid := map[int]bool{1: true, 3: true, 5: true, 6: true}
	jobs := make([]producer.Job, len(ids))
	for i, id := range ids {
		jobs[i] = producer.Job{ID: id, Payload: []byte(id)}
	}
	res, err := p.EnqueueBatch(testenv.Context(t, 10*time.Second), jobs)
	if !errors.Is(err, producer.ErrBatch) {
		t.Fatalf("EnqueueBatch err = %v, want ErrBatch", err)
	}
	for i, r := range res {
		if invalid[i] {
			if !errors.Is(r.Err, producer.ErrInvalidName) || r.Sequence != 0 {
				t.Errorf("job %d (%.20q): %+v; want ErrInvalidName", i, ids[i], r)
			}
			continue
		}
		if r.Err != nil || r.Sequence == 0 || r.ID != ids[i] {
			t.Errorf("job %d (%q): %+v", i, ids[i], r)
		}
		if m := storedJob(t, js, "mixed", ids[i]); string(m.Data) != ids[i] {
			t.Errorf("job %s stored with %q", ids[i], m.Data)
		}
	}
	if n := streamMsgs(t, js, "WORKQ_mixed"); n != 4 {
		t.Fatalf("stream holds %d, want 4", n)
	}
}

func TestEnqueueBatchDuplicates(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := mustNew(t, js, "bdup")
	ctx := testenv.Context(t, 10*time.Second)
	jobs := []producer.Job{{ID: "d1"}, {ID: "d2"}, {ID: "d1", Payload: []byte("again")}, {ID: "d3"}}
	res, err := p.EnqueueBatch(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Duplicate || res[1].Duplicate || res[3].Duplicate {
		t.Fatalf("first occurrences reported duplicate: %+v", res)
	}
	if !res[2].Duplicate || res[2].Sequence != res[0].Sequence {
		t.Fatalf("second d1 = %+v, want Duplicate of sequence %d", res[2], res[0].Sequence)
	}
	if n := streamMsgs(t, js, "WORKQ_bdup"); n != 3 {
		t.Fatalf("stream holds %d, want 3", n)
	}
	// The whole batch again: all duplicates, same sequences.
	again, err := p.EnqueueBatch(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if !r.Duplicate || r.Sequence != res[i].Sequence {
			t.Fatalf("repeat %d = %+v, want duplicate of %d", i, r, res[i].Sequence)
		}
	}
	// And an Enqueue of a batch id is a duplicate too.
	if info, err := p.Enqueue(ctx, nil, producer.ID("d3")); err != nil || !info.Duplicate || info.Sequence != res[3].Sequence {
		t.Fatalf("Enqueue(d3) = %+v, %v", info, err)
	}
}

func TestEnqueueBatchCancelledContext(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := mustNew(t, js, "cancel")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	jobs := make([]producer.Job, 50)
	for i := range jobs {
		jobs[i].ID = fmt.Sprint("c", i)
	}
	start := time.Now()
	res, err := p.EnqueueBatch(ctx, jobs)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("EnqueueBatch on a cancelled context: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("took %s", time.Since(start))
	}
	for i, r := range res {
		if !errors.Is(r.Err, context.Canceled) || r.ID != jobs[i].ID {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if n := streamMsgs(t, js, "WORKQ_cancel"); n != 0 {
		t.Fatalf("stream holds %d after a cancelled batch", n)
	}
	if _, err := p.Enqueue(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enqueue on a cancelled context: %v", err)
	}
}

// concurrentBatches runs batches×perBatch jobs through one producer on js at once and
// checks every job is stored and no stall error surfaces.
func concurrentBatches(t *testing.T, js jetstream.JetStream, q string, batches, perBatch int, opts ...producer.Option) {
	t.Helper()
	p := mustNew(t, js, q, opts...)
	ctx := testenv.Context(t, 60*time.Second)
	maxPending := sampleMaxPending(js, 200*time.Microsecond)
	var wg sync.WaitGroup
	errs := make([]error, batches)
	results := make([][]producer.Result, batches)
	for b := range batches {
		jobs := make([]producer.Job, perBatch)
		for i := range jobs {
			jobs[i] = producer.Job{ID: fmt.Sprintf("b%d-%d", b, i), Payload: []byte("x")}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[b], errs[b] = p.EnqueueBatch(ctx, jobs)
		}()
	}
	wg.Wait()
	seen := maxPending()
	seqs, resent := map[uint64]bool{}, 0
	for b := range batches {
		if errs[b] != nil {
			for i, r := range results[b] {
				if r.Err != nil {
					t.Errorf("batch %d job %d: %v (stall error: %v)", b, i, r.Err, errors.Is(r.Err, jetstream.ErrTooManyStalledMsgs))
					break
				}
			}
			t.Fatalf("batch %d: %v", b, errs[b])
		}
		for i, r := range results[b] {
			// Every id is new, so a Duplicate can only be a resend finding its own first
			// publish stored (a reply later than AckTimeout, on a busy machine): the job
			// is there once, at its sequence. Sequences must differ across jobs.
			if r.Err != nil || r.Sequence == 0 || seqs[r.Sequence] {
				t.Fatalf("batch %d job %d: %+v", b, i, r)
			}
			seqs[r.Sequence] = true
			if r.Duplicate {
				resent++
			}
		}
	}
	if resent > 0 {
		t.Logf("%d jobs stored by a publish whose reply came late and resent (their results say Duplicate)", resent)
	}
	if n := streamMsgs(t, js, "WORKQ_"+q); n != uint64(batches*perBatch) {
		t.Fatalf("stream holds %d, want %d", n, batches*perBatch)
	}
	t.Logf("max async pending seen: %d", seen)
}

func TestEnqueueBatchConcurrentOverClientLimit(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	// Default client limit (4000 pending): 8 batches × a 1024 window may ask for 8192.
	t.Run("default", func(t *testing.T) {
		concurrentBatches(t, env.JetStream(t), "conc", 8, 1500)
	})
	// A small client limit makes the stall certain, whatever the machine's speed.
	t.Run("small-client-limit", func(t *testing.T) {
		js, err := jetstream.New(env.Conn(t), jetstream.WithPublishAsyncMaxPending(100))
		if err != nil {
			t.Fatal(err)
		}
		concurrentBatches(t, js, "conc2", 8, 500)
	})
}

// ---- Status ----

func TestStatusLifecycle(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := mustNew(t, js, "st")
	ctx := testenv.Context(t, 20*time.Second)
	if _, err := p.Status(ctx, "nope"); !errors.Is(err, producer.ErrNotFound) {
		t.Fatalf("Status of an unknown id: %v", err)
	}
	info, err := p.Enqueue(ctx, []byte("hi"), producer.ID("s1"), producer.Kind("k"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Status(ctx, "s1")
	if err != nil || r.State != producer.StateQueued || r.ID != "s1" || r.Queue != "st" || r.Kind != "k" ||
		r.Sequence != info.Sequence || r.EnqueuedAt.IsZero() || r.Attempt != 0 {
		t.Fatalf("Status before work = %+v, %v", r, err)
	}
	w, err := consumer.New(ctx, js, "st", consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		j.SetResult([]byte("res:" + string(j.Payload())))
		return nil
	}), consumer.Logger(quietLog), consumer.Name("st-worker"))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Run did not return")
		}
	}()
	var last *producer.Record
	testenv.Eventually(t, 10*time.Second, "job s1 done", func() bool {
		r, err := p.Status(ctx, "s1")
		if err != nil {
			t.Fatalf("Status while working: %v", err)
		}
		last = r
		return r.State == producer.StateDone
	})
	if string(last.Result) != "res:hi" || last.Attempt != 1 || last.Worker.Name != "st-worker" ||
		last.Sequence != info.Sequence || last.FinishedAt.IsZero() {
		t.Fatalf("done record: %+v", last)
	}
	// The job left the work queue; Status still finds the record.
	testenv.Eventually(t, 5*time.Second, "stream empty", func() bool { return streamMsgs(t, js, "WORKQ_st") == 0 })
	if r, err := p.Status(ctx, "s1"); err != nil || r.State != producer.StateDone {
		t.Fatalf("Status after ack: %+v, %v", r, err)
	}
	if _, err := p.Status(ctx, "nope"); !errors.Is(err, producer.ErrNotFound) {
		t.Fatalf("Status of an unknown id with a worker running: %v", err)
	}
}

// ---- unreachable server ----

func TestNewWaitsForUnreachableServer(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	env.Stop()
	js := env.JetStream(t) // connects once the server is back
	p := testenv.WaitsForServer(t, func() {
		if err := env.Server.Restart(); err != nil {
			t.Fatal(err)
		}
	}, func(ctx context.Context) (*producer.Producer, error) { return producer.New(ctx, js, "late") })
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("x"), producer.ID("after")); err != nil {
		t.Fatal(err)
	}
}

// ---- bad input never panics ----

// Every entry point given nil or out-of-range input returns an error wrapping
// ErrInvalidOption (the one value consumer and kvlock export too) that says which
// option or argument and what value, or does the documented thing (nil options are
// skipped) — and never panics. A refused New creates nothing.
func TestBadInputNeverPanics(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	var nilCtx context.Context // a variable, as a caller's bug would pass it
	const q = "nopanic"
	p := mustNew(t, js, q)
	newErr := func(opts ...producer.Option) func() error {
		return func() error { _, err := producer.New(ctx, js, "refused", opts...); return err }
	}
	collectorErr := func(opts ...producer.CollectorOption) func() error {
		return func() error { _, err := producer.NewQueueCollector(js, nil, opts...); return err }
	}
	cases := []badinput.Case{
		{"New(nil ctx)", "nil context", func() error { _, err := producer.New(nilCtx, js, q); return err }},
		{"New(nil JetStream)", "nil JetStream", func() error { _, err := producer.New(ctx, nil, q); return err }},
		{"New(nil Option) is skipped", "", func() error {
			_, err := producer.New(ctx, js, q, nil, producer.MaxInFlight(10), nil)
			return err
		}},
		{"Replicas(0)", "Replicas(0): want 1 to 5", newErr(producer.Replicas(0))},
		{"Replicas(6)", "Replicas(6): want 1 to 5", newErr(producer.Replicas(6))},
		{"DuplicateWindow(999ms)", "DuplicateWindow(999ms): want at least 1s", newErr(producer.DuplicateWindow(999 * time.Millisecond))},
		{"RecordTTL(0)", "RecordTTL(0s): want at least 1s", newErr(producer.RecordTTL(0))},
		{"MaxInFlight(0)", "MaxInFlight(0): want at least 1", newErr(producer.MaxInFlight(0))},
		{"AckTimeout(-1s)", "AckTimeout(-1s): want more than 0", newErr(producer.AckTimeout(-time.Second))},
		{"Enqueue(nil EnqueueOption) is skipped", "", func() error {
			info, err := p.Enqueue(ctx, []byte("x"), nil, producer.ID("opt-1"), nil)
			if err == nil && info.ID != "opt-1" {
				return fmt.Errorf("enqueued as %q, want opt-1", info.ID)
			}
			return err
		}},
		{"Enqueue(nil ctx)", "nil context", func() error { _, err := p.Enqueue(nilCtx, []byte("x"), producer.ID("nil-1")); return err }},
		{"Enqueue(MaxAttempts(-1))", "MaxAttempts(-1): want at least 1", func() error {
			_, err := p.Enqueue(ctx, []byte("x"), producer.ID("neg-1"), producer.MaxAttempts(-1))
			return err
		}},
		{"EnqueueBatch(nil ctx)", "nil context", func() error {
			res, err := p.EnqueueBatch(nilCtx, []producer.Job{{ID: "nb-1"}, {ID: "nb-2"}})
			if len(res) != 2 || res[0].ID != "nb-1" || res[1].Err == nil {
				return fmt.Errorf("results %+v, want one per job carrying the error", res)
			}
			return err
		}},
		{"Status(nil ctx)", "nil context", func() error { _, err := p.Status(nilCtx, "opt-1"); return err }},
		{"NewQueueCollector(nil JetStream)", "nil JetStream", func() error { _, err := producer.NewQueueCollector(nil, nil); return err }},
		{"NewQueueCollector(nil CollectorOption) is skipped", "", collectorErr(nil, producer.CollectorCache(0), nil)},
		{"CollectorCache(-1s)", "CollectorCache(-1s): want 0 or more", collectorErr(producer.CollectorCache(-time.Second))},
		{"CollectorTimeout(0)", "CollectorTimeout(0s): want more than 0", collectorErr(producer.CollectorTimeout(0))},
	}
	badinput.Run(t, producer.ErrInvalidOption, cases)
	if !errors.Is(producer.ErrInvalidOption, consumer.ErrInvalidOption) || !errors.Is(producer.ErrInvalidOption, kvlock.ErrInvalidOption) {
		t.Error("producer's, consumer's and kvlock's ErrInvalidOption are not one value")
	}
	// Only the valid enqueue was stored, and the refused New created nothing.
	if n := streamMsgs(t, js, "WORKQ_"+q); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
	if _, err := js.Stream(ctx, "WORKQ_refused"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("a refused New created the queue's stream: %v", err)
	}
}
