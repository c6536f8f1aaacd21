package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// seqRecorder is a handler for sequence tests: it records every run's job id, its
// fencing token and the start and end of its handler, and fails the jobs it is told
// to.
type seqRecorder struct {
	mu      sync.Mutex
	runs    []seqRun
	running map[string]int // by sequence key: runs of it under way
	overlap []string       // keys seen running twice at once
	most    int            // the most runs under way at once, any keys
	now     int
	failN   map[string]int           // job id: attempts that fail (then it succeeds)
	dead    map[string]bool          // job id: fails for good
	gate    map[string]chan struct{} // job id: waits for it (or its context)
	sleep   time.Duration
}

type seqRun struct {
	id         string
	token      uint64
	start, end time.Time
}

func newSeqRecorder() *seqRecorder {
	return &seqRecorder{running: map[string]int{}, failN: map[string]int{}, dead: map[string]bool{}, gate: map[string]chan struct{}{}}
}

func (s *seqRecorder) Handle(ctx context.Context, j *consumer.Job) error {
	tok, err := j.FencingToken(ctx)
	if err != nil {
		return err
	}
	key := j.Header().Get("Workq-Sequence")
	s.mu.Lock()
	s.running[key]++
	if s.running[key] > 1 {
		s.overlap = append(s.overlap, key)
	}
	s.now++
	s.most = max(s.most, s.now)
	run := seqRun{id: j.ID(), token: tok, start: time.Now()}
	gate, fails, dead := s.gate[j.ID()], s.failN[j.ID()] >= j.Attempt(), s.dead[j.ID()]
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running[key]--
		s.now--
		run.end = time.Now()
		s.runs = append(s.runs, run)
		s.mu.Unlock()
	}()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.sleep > 0 {
		time.Sleep(time.Duration(rand.Int64N(int64(s.sleep))))
	}
	switch {
	case dead:
		return consumer.Permanent(errors.New("dies"))
	case fails:
		return fmt.Errorf("attempt %d fails", j.Attempt())
	}
	return nil
}

// ran returns the runs of job id.
func (s *seqRecorder) ran(id string) []seqRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []seqRun
	for _, r := range s.runs {
		if r.id == id {
			out = append(out, r)
		}
	}
	return out
}

// Jobs with one key run one at a time, in the order they were enqueued, across three
// workers; jobs of different keys run side by side. The order is checked from the
// records (each job's claim after the one before it ended) and from the handlers'
// clocks.
func TestSequenceOrderAndExclusion(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "seq-order"
	s := newSeqRecorder()
	s.sleep = 5 * time.Millisecond
	p := newProducer(t, js, q)
	for range 3 {
		runWorker(t, newWorker(t, js, q, s, consumer.Concurrency(4)))
	}
	ctx := testenv.Context(t, 120*time.Second)
	keys := []string{"customer-1", "alice@example.com", "https://example.com/a b", "k4"}
	const perKey = 25
	byKey := map[string][]string{}
	var all []string
	var batch []producer.Job
	for i := range perKey {
		for _, k := range keys {
			id := fmt.Sprintf("%s-%d", k, i)
			byKey[k] = append(byKey[k], id)
			all = append(all, id)
			if i%2 == 0 {
				if _, err := p.Enqueue(ctx, []byte(id), producer.ID(id), producer.Sequence(k)); err != nil {
					t.Fatal(err)
				}
			} else {
				batch = append(batch, producer.Job{ID: id, Payload: []byte(id), Sequence: k})
			}
		}
		if len(batch) > 0 {
			if res, err := p.EnqueueBatch(ctx, batch); err != nil {
				t.Fatal(err, res[0].Err)
			}
			batch = nil
		}
	}
	recs := waitEnded(t, p, all)
	for k, ids := range byKey {
		for i, id := range ids {
			r := recs[id]
			if r.State != producer.StateDone || r.Attempt != 1 || r.SequenceKey != k {
				t.Fatalf("%s: %s, attempt %d, key %q", id, r.State, r.Attempt, r.SequenceKey)
			}
			if i == 0 {
				continue
			}
			prev := recs[ids[i-1]]
			if runs := s.ran(id); len(runs) != 1 || runs[0].token <= prev.Revision {
				t.Errorf("%s claimed at revision %v, before %s ended at revision %d", id, runs, prev.ID, prev.Revision)
			}
			if !r.StartedAt.After(prev.FinishedAt) {
				t.Errorf("%s started at %s, before %s finished at %s", id, r.StartedAt, prev.ID, prev.FinishedAt)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.overlap) > 0 {
		t.Errorf("keys ran twice at once: %v", s.overlap)
	}
	if s.most < 2 {
		t.Errorf("at most %d job ran at once: the keys did not run side by side", s.most)
	}
}

// A job that fails and waits out its backoff holds its key: the job after it starts
// only after its retry committed, and counts no attempt meanwhile.
func TestSequenceRetryBlocksSuccessor(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "seq-retry"
	s := newSeqRecorder()
	s.failN["a"] = 2
	p := newProducer(t, js, q)
	runWorker(t, newWorker(t, js, q, s, consumer.Concurrency(4), consumer.Backoff(consumer.Constant(200*time.Millisecond))))
	ctx := testenv.Context(t, 60*time.Second)
	for _, id := range []string{"a", "b"} {
		if _, err := p.Enqueue(ctx, nil, producer.ID(id), producer.Sequence("k")); err != nil {
			t.Fatal(err)
		}
	}
	recs := waitEnded(t, p, []string{"a", "b"})
	a, b := recs["a"], recs["b"]
	if a.State != producer.StateDone || a.Attempt != 3 || b.State != producer.StateDone || b.Attempt != 1 {
		t.Fatalf("a: %s attempt %d; b: %s attempt %d", a.State, a.Attempt, b.State, b.Attempt)
	}
	if runs := s.ran("b"); len(runs) != 1 || !runs[0].start.After(a.FinishedAt) {
		t.Fatalf("b ran %v, a committed at %s", runs, a.FinishedAt)
	}
}

// By default a job that dies lets the key go on; with HaltOnDead the next job halts
// the key until ResumeSequence, and the jobs after it wait behind it.
func TestSequenceDeadGoesOnOrHalts(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "seq-dead"
	s := newSeqRecorder()
	s.dead["a1"], s.dead["b1"] = true, true
	p := newProducer(t, js, q)
	runWorker(t, newWorker(t, js, q, s, consumer.Concurrency(4)))
	ctx := testenv.Context(t, 60*time.Second)
	enqueue := func(id, key string, opts ...producer.EnqueueOption) {
		t.Helper()
		if _, err := p.Enqueue(ctx, nil, append([]producer.EnqueueOption{producer.ID(id), producer.Sequence(key)}, opts...)...); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("a1", "goes-on")
	enqueue("a2", "goes-on")
	enqueue("b1", "halts")
	enqueue("b2", "halts", producer.HaltOnDead())
	enqueue("b3", "halts")
	recs := waitEnded(t, p, []string{"a1", "a2", "b1"})
	if recs["a1"].State != producer.StateDead || recs["a2"].State != producer.StateDone || !slices.Equal(recs["a2"].FailedParents, []string{"a1"}) {
		t.Fatalf("a1 %s, a2 %s (failed before it: %v)", recs["a1"].State, recs["a2"].State, recs["a2"].FailedParents)
	}
	var halted []producer.SequenceInfo
	testenv.Eventually(t, 10*time.Second, "the key to halt", func() bool {
		seqs, err := p.Sequences(ctx)
		if err != nil {
			t.Fatal(err)
		}
		halted = seqs
		return len(seqs) == 1 && seqs[0].Halted == "b2"
	})
	if h := halted[0]; h.Key != "halts" || h.HaltedAfter != "b1" || h.Waiting != 1 || h.Active != "" {
		t.Fatalf("sequences: %+v", halted)
	}
	// Halted, b2 has no message in the queue, nor b3 behind it: nothing to run.
	for _, id := range []string{"b2", "b3"} {
		if r := status(t, p, id); r.State != producer.StateWaiting || r.Sequence != 0 || len(s.ran(id)) != 0 {
			t.Fatalf("%s of the halted key: %s, message %d, ran %d times", id, r.State, r.Sequence, len(s.ran(id)))
		}
	}
	if _, err := p.ResumeSequence(ctx, "goes-on"); !errors.Is(err, producer.ErrNotHalted) {
		t.Fatalf("resume of a key not halted: %v", err)
	}
	r, err := p.ResumeSequence(ctx, "halts")
	if err != nil || r.ID != "b2" {
		t.Fatalf("resume: %+v, %v", r, err)
	}
	recs = waitEnded(t, p, []string{"b2", "b3"})
	if recs["b2"].State != producer.StateDone || recs["b3"].State != producer.StateDone || !recs["b3"].StartedAt.After(recs["b2"].FinishedAt) {
		t.Fatalf("b2 %+v, b3 %+v", recs["b2"], recs["b3"])
	}
	if seqs, err := p.Sequences(ctx); err != nil || len(seqs) != 0 {
		t.Fatalf("sequences after all ended: %+v, %v", seqs, err)
	}

	// A key whose last job had died before the next was enqueued halts all the same;
	// cancelling the halted job lets the key go on.
	s.mu.Lock()
	s.dead["c1"] = true
	s.mu.Unlock()
	enqueue("c1", "late")
	waitEnded(t, p, []string{"c1"})
	info, err := p.Enqueue(ctx, nil, producer.ID("c2"), producer.Sequence("late"), producer.HaltOnDead())
	if err != nil || !info.Waiting {
		t.Fatalf("c2: %+v, %v", info, err)
	}
	if c2 := status(t, p, "c2"); !c2.Halted || c2.After != "c1" || c2.State != producer.StateWaiting {
		t.Fatalf("c2 enqueued after c1 died: %+v", c2)
	}
	enqueue("c3", "late")
	if _, err := p.Cancel(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	if recs := waitEnded(t, p, []string{"c2", "c3"}); recs["c2"].State != producer.StateCancelled || recs["c3"].State != producer.StateDone || len(s.ran("c2")) != 0 {
		t.Fatalf("c2 %s (ran %d), c3 %s", recs["c2"].State, len(s.ran("c2")), recs["c3"].State)
	}
	// Without HaltOnDead, a job enqueued after its key's last job died runs, told so.
	s.mu.Lock()
	s.dead["d1"] = true
	s.mu.Unlock()
	enqueue("d1", "after-death")
	waitEnded(t, p, []string{"d1"})
	enqueue("d2", "after-death")
	if d2 := waitEnded(t, p, []string{"d2"})["d2"]; d2.State != producer.StateDone || !slices.Equal(d2.FailedParents, []string{"d1"}) {
		t.Fatalf("d2 enqueued after d1 died: %s, failed before it %v; want done, told of d1", d2.State, d2.FailedParents)
	}
}

// Cancelling a job that waits lets the job after it go once the one before ends;
// the cancelled job never runs.
func TestSequenceCancelWaiting(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "seq-cancel"
	s := newSeqRecorder()
	gate := make(chan struct{})
	s.gate["a"] = gate
	p := newProducer(t, js, q)
	runWorker(t, newWorker(t, js, q, s, consumer.Concurrency(4)))
	ctx := testenv.Context(t, 60*time.Second)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := p.Enqueue(ctx, nil, producer.ID(id), producer.Sequence("k")); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "a to run", func() bool { return status(t, p, "a").State == producer.StateRunning })
	if b := status(t, p, "b"); b.State != producer.StateWaiting || b.After != "a" {
		t.Fatalf("b: %s after %q", b.State, b.After)
	}
	if _, err := p.Cancel(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if c := status(t, p, "c"); c.State != producer.StateWaiting {
		t.Fatalf("c ran before a ended: %s", c.State)
	}
	close(gate)
	recs := waitEnded(t, p, []string{"a", "b", "c"})
	if recs["a"].State != producer.StateDone || recs["b"].State != producer.StateCancelled || recs["c"].State != producer.StateDone {
		t.Fatalf("a %s, b %s, c %s", recs["a"].State, recs["b"].State, recs["c"].State)
	}
	if len(s.ran("b")) != 0 || !recs["c"].StartedAt.After(recs["a"].FinishedAt) {
		t.Fatalf("b ran %d times; c started %s, a finished %s", len(s.ran("b")), recs["c"].StartedAt, recs["a"].FinishedAt)
	}
}

// Enqueues of one key from many goroutines at once, while its jobs run and end, make
// one chain: every job but the first waits for a distinct job before it, each runs
// once, and no two run at once.
func TestSequenceConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "seq-concurrent"
	s := newSeqRecorder()
	s.sleep = 2 * time.Millisecond
	p := newProducer(t, js, q)
	for range 2 {
		runWorker(t, newWorker(t, js, q, s, consumer.Concurrency(8)))
	}
	ctx := testenv.Context(t, 120*time.Second)
	const producers, each = 8, 20
	var wg sync.WaitGroup
	ids := make(chan string, producers*each)
	for g := range producers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("g%d-%d", g, i)
				if _, err := p.Enqueue(ctx, nil, producer.ID(id), producer.Sequence("hot")); err != nil {
					t.Error(err)
					return
				}
				ids <- id
			}
		})
	}
	wg.Wait()
	close(ids)
	var all []string
	for id := range ids {
		all = append(all, id)
	}
	recs := waitEnded(t, p, all)
	after := map[string]string{}
	first := 0
	for _, id := range all {
		r := recs[id]
		if r.State != producer.StateDone || len(s.ran(id)) != 1 {
			t.Fatalf("%s: %s, ran %d times", id, r.State, len(s.ran(id)))
		}
		if r.After == "" {
			first++
			continue
		}
		if other, dup := after[r.After]; dup {
			t.Errorf("%s and %s both waited for %s", id, other, r.After)
		}
		after[r.After] = id
		if prev := recs[r.After]; prev != nil && !r.StartedAt.After(prev.FinishedAt) {
			t.Errorf("%s started at %s, before %s finished at %s", id, r.StartedAt, prev.ID, prev.FinishedAt)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.overlap) > 0 {
		t.Errorf("the key ran twice at once %d times", len(s.overlap))
	}
	t.Logf("%d jobs, %d started with the one before ended (no wait)", len(all), first)
}

// A worker killed while it runs a sequence's job (its connection gone) holds the key
// until the job's AckWait runs out: the next job waits, the job runs again on a live
// worker, and the next one runs after it committed.
func TestSequenceKilledWorker(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "seq-killed"
	p := newProducer(t, js, q)
	opts := []consumer.Option{consumer.AckWait(time.Second), consumer.Concurrency(2)}
	aStarted, dieA := doomedWorker(t, env, q, opts)
	ctx := testenv.Context(t, 60*time.Second)
	for _, id := range []string{"a", "b"} {
		if _, err := p.Enqueue(ctx, nil, producer.ID(id), producer.Sequence("k")); err != nil {
			t.Fatal(err)
		}
	}
	<-aStarted
	testenv.Eventually(t, 5*time.Second, "A's claim", func() bool {
		r := status(t, p, "a")
		return r.State == producer.StateRunning && r.Worker.Name == "A"
	})
	dieA() // the process "dies": nothing more from A reaches the server
	killed := time.Now()

	s := newSeqRecorder()
	runWorker(t, newWorker(t, js, q, s, append(opts, consumer.Name("B"))...))
	recs := waitEnded(t, p, []string{"a", "b"})
	a, b := recs["a"], recs["b"]
	if a.State != producer.StateDone || a.Attempt != 2 || b.State != producer.StateDone || b.Attempt != 1 {
		t.Fatalf("a: %s attempt %d; b: %s attempt %d", a.State, a.Attempt, b.State, b.Attempt)
	}
	runs := s.ran("b")
	if len(runs) != 1 || !runs[0].start.After(a.FinishedAt) || !a.StartedAt.After(killed) {
		t.Fatalf("b ran %v; a's second run started %s and committed %s; A died %s", runs, a.StartedAt, a.FinishedAt, killed)
	}
}

// A batch's sequenced jobs are written together: their records land in one atomic
// batch (revisions within one batch's span), each key's jobs chained in the batch's
// order, the first job of a key queued when nothing of the key runs; a batch with an
// id that has a record falls back to one job at a time and reports the duplicate.
// Then they run, each key in order.
func TestSequenceBatchEnqueue(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "seq-batch"
	p := newProducer(t, js, q)
	ctx := testenv.Context(t, 60*time.Second)
	if _, err := p.Enqueue(ctx, nil, producer.ID("x-0"), producer.Sequence("x")); err != nil {
		t.Fatal(err)
	}
	var batch []producer.Job
	for _, id := range []string{"x-1", "y-0", "x-2", "y-1", "x-3", "y-2"} {
		batch = append(batch, producer.Job{ID: id, Sequence: id[:1]})
	}
	res, err := p.EnqueueBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	var lo, hi uint64
	for k, r := range res {
		if first := r.ID == "y-0"; r.Waiting == first || first && r.Sequence == 0 {
			t.Errorf("%s: %+v; want only y-0 queued", r.ID, r.JobInfo)
		}
		rec := status(t, p, batch[k].ID)
		if lo == 0 || rec.Revision < lo {
			lo = rec.Revision
		}
		hi = max(hi, rec.Revision)
		if want := map[string]string{"x-1": "x-0", "x-2": "x-1", "x-3": "x-2", "y-1": "y-0", "y-2": "y-1"}[r.ID]; rec.After != want {
			t.Errorf("%s waits after %q, want %q", r.ID, rec.After, want)
		}
	}
	if hi-lo > 11 { // six records and five links: one batch; alone, each job's write also holds its tail
		t.Errorf("the batch's records span revisions %d to %d: not one atomic batch", lo, hi)
	}
	res, err = p.EnqueueBatch(ctx, []producer.Job{{ID: "z-0", Sequence: "z"}, {ID: "x-0", Sequence: "x"}, {ID: "z-1", Sequence: "z"}})
	if err != nil || !res[1].Duplicate || res[0].Duplicate || res[2].Duplicate || !res[2].Waiting {
		t.Fatalf("a batch with an id that exists: %+v, %v", res, err)
	}
	s := newSeqRecorder()
	runWorker(t, newWorker(t, js, q, s, consumer.Concurrency(8)))
	recs := waitEnded(t, p, []string{"x-0", "x-1", "x-2", "x-3", "y-0", "y-1", "y-2", "z-0", "z-1"})
	for _, chain := range [][]string{{"x-0", "x-1", "x-2", "x-3"}, {"y-0", "y-1", "y-2"}, {"z-0", "z-1"}} {
		for i := 1; i < len(chain); i++ {
			prev, r := recs[chain[i-1]], recs[chain[i]]
			if r.State != producer.StateDone || len(s.ran(r.ID)) != 1 || !r.StartedAt.After(prev.FinishedAt) {
				t.Errorf("%s: %s, ran %d times, started %s; %s finished %s", r.ID, r.State, len(s.ran(r.ID)), r.StartedAt, prev.ID, prev.FinishedAt)
			}
		}
	}
}
