package consumer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// What waits for a job that is cancelled while it runs — the next job of its
// sequence, a workflow dependent that runs when a parent failed — starts only once
// the cancelled run has ended: its worker's settle, after the handler returned,
// tells it; a worker that died leaves that to the next delivery of the job's message,
// which stays in the queue until then (docs/sequences.md, docs/workflows.md).

// runClock is a handler that records when each job's handler started and returned.
// A job named in hold waits for its context (the cancel, which its worker sees at a
// heartbeat) and then goes on for hold[id], ignoring it, as a handler that finishes
// a step before it looks at its context; a job named in block waits for its context
// only.
type runClock struct {
	mu      sync.Mutex
	start   map[string]time.Time // by job id: when its first run started
	end     map[string]time.Time // by job id: when its first run returned
	runs    map[string]int
	hold    map[string]time.Duration
	block   map[string]bool
	started chan string
}

func newRunClock() *runClock {
	return &runClock{start: map[string]time.Time{}, end: map[string]time.Time{}, runs: map[string]int{},
		hold: map[string]time.Duration{}, block: map[string]bool{}, started: make(chan string, 16)}
}

func (c *runClock) Handle(ctx context.Context, j *consumer.Job) error {
	id := j.ID()
	c.mu.Lock()
	c.runs[id]++
	if c.runs[id] == 1 {
		c.start[id] = time.Now()
	}
	hold, held := c.hold[id]
	block := c.block[id]
	c.mu.Unlock()
	select {
	case c.started <- id:
	default: // nobody waits for it
	}
	defer func() {
		c.mu.Lock()
		if _, ok := c.end[id]; !ok {
			c.end[id] = time.Now()
		}
		c.mu.Unlock()
	}()
	if held || block {
		<-ctx.Done()
		time.Sleep(hold) // not its context's: the run goes on after the cancel
		return ctx.Err()
	}
	return nil
}

// times returns when job id's first run started and returned, and how many runs it had.
func (c *runClock) times(id string) (start, end time.Time, runs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start[id], c.end[id], c.runs[id]
}

// waitStarted waits for job id's handler to start.
func (c *runClock) waitStarted(t *testing.T, id string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case got := <-c.started:
			if got == id {
				return
			}
		case <-deadline:
			t.Fatalf("job %s did not start within 30 s", id)
		}
	}
}

// startedAfterEnd fails the test unless job next's only run started after job
// cancelled's handler returned.
func (c *runClock) startedAfterEnd(t *testing.T, next, cancelled string) {
	t.Helper()
	_, end, _ := c.times(cancelled)
	start, _, runs := c.times(next)
	switch {
	case runs != 1:
		t.Errorf("%s ran %d times; want once", next, runs)
	case end.IsZero():
		t.Errorf("%s ran while the cancelled %s's handler had not returned", next, cancelled)
	case !start.After(end):
		t.Errorf("%s started %s before the cancelled %s's handler returned; want after it", next, end.Sub(start), cancelled)
	}
}

// emptyStream waits until queue q's stream holds no message: a cancelled job's
// message leaves the queue once its run has ended.
func emptyStream(t *testing.T, js jetstream.JetStream, q string) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, "the jobs stream to empty", func() bool { return qaStreamMsgs(t, js, "WORKQ_"+q) == 0 })
}

// A sequence's job cancelled while it runs holds its key until its handler returns,
// though it goes on for 800 ms after its worker saw the cancel: the next job starts
// after that, whether it was enqueued before the cancel (key "before"), after it
// (key "after": the enqueue finds the cancelled job's message still in the queue
// and waits), or waits behind a job cancelled while it waited (key "chain": c3
// waits for b3, cancelled, which held its place behind a3). The worker has slots
// to spare, so a next job released early would run beside the cancelled one.
//
// Fails with the producer's Cancel telling a running job's successor at once, as it
// did (keys before and chain; the bug this covers), with the enqueue taking a
// cancelled job whose message is in the queue as ended (key after), and with the
// walk through a job cancelled while it waited taking the running one it waited for
// as ended (key chain).
func TestSequenceCancelRunningReleasesAfterItsEnd(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "seq-cancel-running"
	c := newRunClock()
	for _, id := range []string{"a1", "a2", "a3"} {
		c.hold[id] = 800 * time.Millisecond
	}
	p := newProducer(t, js, q)
	w := newWorker(t, js, q, c, consumer.AckWait(2*time.Second), consumer.Concurrency(8))
	runWorker(t, w)
	ctx := testenv.Context(t, 60*time.Second)
	enqueue := func(key string, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if _, err := p.Enqueue(ctx, nil, producer.ID(id), producer.Sequence(key)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cancel := func(id string) {
		t.Helper()
		if rec, err := p.Cancel(ctx, id); err != nil || rec.State != producer.StateCancelled {
			t.Fatalf("Cancel(%s) = %+v, %v", id, rec, err)
		}
	}
	enqueue("before", "a1", "b1")
	enqueue("after", "a2")
	enqueue("chain", "a3", "b3", "c3")
	for _, id := range []string{"a1", "a2", "a3"} {
		testenv.Eventually(t, 10*time.Second, id+"'s claim", func() bool { return status(t, p, id).State == producer.StateRunning })
	}
	cancel("a1")
	cancel("a2")
	enqueue("after", "b2")
	if r := status(t, p, "b2"); r.State != producer.StateWaiting || r.After != "a2" {
		t.Errorf("b2, enqueued after a2's cancel as a2 runs: %s after %q; want waiting after a2", r.State, r.After)
	}
	cancel("a3")
	cancel("b3") // waiting
	recs := waitEnded(t, p, []string{"a1", "b1", "a2", "b2", "a3", "b3", "c3"})
	for id, want := range map[string]producer.State{"a1": producer.StateCancelled, "b1": producer.StateDone,
		"a2": producer.StateCancelled, "b2": producer.StateDone,
		"a3": producer.StateCancelled, "b3": producer.StateCancelled, "c3": producer.StateDone} {
		if recs[id].State != want {
			t.Errorf("%s: %s, want %s", id, recs[id].State, want)
		}
	}
	c.startedAfterEnd(t, "b1", "a1")
	c.startedAfterEnd(t, "b2", "a2")
	c.startedAfterEnd(t, "c3", "a3")
	if _, _, runs := c.times("b3"); runs != 0 {
		t.Errorf("b3, cancelled while it waited, ran %d times", runs)
	}
	testenv.Eventually(t, 10*time.Second, "the worker to count the three cancelled runs", func() bool { return w.Stats().Cancelled >= 3 })
	emptyStream(t, js, q)
}

// A workflow's task cancelled while it runs: its dependent that runs when a parent
// failed starts after the cancelled handler returned (not when the cancel was
// written), told that its parent failed; its dependent that does not run then is
// cancelled, unrun. Fails with the producer's Cancel telling a running task's
// dependents at once, as it did.
func TestWorkflowCancelRunningParentReleasesAfterItsEnd(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "wf-cancel-running"
	c := newRunClock()
	c.hold["w.a"] = 800 * time.Millisecond
	p := newProducer(t, js, q)
	runWorker(t, newWorker(t, js, q, c, consumer.AckWait(2*time.Second), consumer.Concurrency(4)))
	ctx := testenv.Context(t, 60*time.Second)
	tasks := enqueueFlow(t, p, producer.NewWorkflow("w").
		Task("a", producer.Job{}).
		Task("anyway", producer.Job{}, producer.DependsOn("a"), producer.RunIfParentFailed()).
		Task("only-if-ok", producer.Job{}, producer.DependsOn("a")))
	c.waitStarted(t, "w.a")
	testenv.Eventually(t, 10*time.Second, "a's claim", func() bool { return status(t, p, "w.a").State == producer.StateRunning })
	if _, err := p.Cancel(ctx, "w.a"); err != nil {
		t.Fatal(err)
	}
	recs := waitEnded(t, p, tasks)
	for id, want := range map[string]producer.State{"w.a": producer.StateCancelled, "w.anyway": producer.StateDone,
		"w.only-if-ok": producer.StateCancelled} {
		if recs[id].State != want {
			t.Errorf("%s: %s, want %s", id, recs[id].State, want)
		}
	}
	c.startedAfterEnd(t, "w.anyway", "w.a")
	if got := recs["w.anyway"].FailedParents; len(got) != 1 || got[0] != "a" {
		t.Errorf("anyway was told %v failed; want [a]", got)
	}
	if _, _, runs := c.times("w.only-if-ok"); runs != 0 {
		t.Errorf("only-if-ok ran %d times after its parent was cancelled", runs)
	}
	emptyStream(t, js, q)
}

// A worker running a sequence's job is cut off (nothing of it reaches the server
// from then on) before it can see the job's cancel, and dies: the next job still
// runs, after the dead worker's handler returned and within AckWait and some slack
// of the cut — the job's message, which the cancel left in the queue, comes back to
// the live worker, whose claim finds the record cancelled, tells the next job and
// drops it unrun. Fails with the producer's Cancel telling the next job at once, as
// it did (it starts while the cut-off handler still runs), and with the cancel of a
// running job removing its message without telling (the next job waits for ever).
func TestSequenceCancelRunningWorkerDies(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "seq-cancel-dies"
	const ackWait = 2 * time.Second
	opts := []consumer.Option{consumer.AckWait(ackWait)}
	p := newProducer(t, js, q)
	c := newRunClock()
	c.block["a"] = true

	px := testenv.StartProxy(t, env.URL())
	ncA := px.Conn(t)
	jsA, err := jetstream.New(ncA)
	if err != nil {
		t.Fatal(err)
	}
	// One slot and nothing pulled ahead: A asks for no job while it runs a, so a job
	// released early goes to B, and runs beside a.
	wA := newWorker(t, jsA, q, c, append(opts, consumer.Name("A"), consumer.Concurrency(1), consumer.Prefetch(0), consumer.DrainTimeout(0))...)
	runA, stopA := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	go func() { doneA <- wA.Run(runA) }()
	dieA := sync.OnceFunc(func() { // A's process dies: nothing more of it reaches the server, its handler returns
		ncA.Close()
		stopA()
		<-doneA
	})
	t.Cleanup(dieA)

	ctx := testenv.Context(t, 60*time.Second)
	for _, id := range []string{"a", "b"} {
		if _, err := p.Enqueue(ctx, nil, producer.ID(id), producer.Sequence("k")); err != nil {
			t.Fatal(err)
		}
	}
	c.waitStarted(t, "a")
	testenv.Eventually(t, 10*time.Second, "A's claim", func() bool { return status(t, p, "a").State == producer.StateRunning })
	wB := newWorker(t, js, q, c, append(opts, consumer.Name("B"), consumer.Concurrency(2))...)
	runWorker(t, wB)

	px.Pause() // A is cut off: it never sees the cancel, and its settle never lands
	cut := time.Now()
	if _, err := p.Cancel(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a successor released by the cancel starts meanwhile, beside a
	dieA()

	recs := waitEnded(t, p, []string{"a", "b"})
	if recs["a"].State != producer.StateCancelled || recs["b"].State != producer.StateDone {
		t.Fatalf("a %s, b %s; want cancelled, done", recs["a"].State, recs["b"].State)
	}
	c.startedAfterEnd(t, "b", "a")
	start, _, _ := c.times("b")
	if bound := ackWait + 5*time.Second; start.Sub(cut) > bound {
		t.Errorf("b started %s after A was cut off; want within AckWait and slack, %s", start.Sub(cut), bound)
	}
	if _, _, runs := c.times("a"); runs != 1 {
		t.Errorf("a ran %d times; want once, on A", runs)
	}
	testenv.Eventually(t, 10*time.Second, "B to drop a's delivery as cancelled", func() bool { return wB.Stats().Cancelled == 1 })
	emptyStream(t, js, q)
}

// The run of a sequence's job cancelled as it runs may go on after the cancel, and
// the next job of its key waits for it all the same:
//
//   - key "long": l1's handler finishes a step of 3 s before it looks at its context,
//     past AckWait (2 s). Its worker goes on reporting progress for the delivery after
//     the cancel, so the server does not send it again; l2 starts after l1 returned.
//     Fails with the worker ending its progress reports when its renewal finds the
//     cancel: the message comes back after AckWait, and that delivery releases l2.
//   - key "copy": c1 goes on for 1 s after it sees the cancel, and a copy of its
//     message reaches a worker meanwhile (stored again, as a server that forgot the
//     delivery sends it). The copy is put back until a lease (AckWait) has passed
//     since the cancel, by when the run has ended; c2 starts after c1 returned.
//     Fails with a copy of a job cancelled after a claim acked (and its successor
//     told) at once.
func TestSequenceCancelledRunHoldsItsKeyUntilItEnds(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "seq-cancel-long"
	c := newRunClock()
	c.hold["l1"] = 3 * time.Second
	c.hold["c1"] = time.Second
	p := newProducer(t, js, q)
	w := newWorker(t, js, q, c, consumer.AckWait(2*time.Second), consumer.Concurrency(4))
	runWorker(t, w)
	ctx := testenv.Context(t, 60*time.Second)
	for _, id := range []string{"l1", "l2", "c1", "c2"} {
		if _, err := p.Enqueue(ctx, nil, producer.ID(id), producer.Sequence(id[:1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"l1", "c1"} {
		testenv.Eventually(t, 10*time.Second, id+"'s claim", func() bool { return status(t, p, id).State == producer.StateRunning })
	}
	if _, err := p.Cancel(ctx, "l1"); err != nil {
		t.Fatal(err)
	}
	rec, err := p.Cancel(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	// The copy: c1's message as stored, stored again.
	stream, err := js.Stream(ctx, "WORKQ_"+q)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetMsg(ctx, rec.Sequence)
	if err != nil {
		t.Fatalf("c1's message %d, cancelled as it ran: %v (it stays until the run has ended)", rec.Sequence, err)
	}
	copyMsg := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{}}
	for k, v := range m.Header {
		if k != "Nats-Msg-Id" {
			copyMsg.Header[k] = v
		}
	}
	if _, err := js.PublishMsg(ctx, copyMsg); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, p, []string{"l2", "c2"})
	for _, k := range []string{"l", "c"} {
		c.startedAfterEnd(t, k+"2", k+"1")
		if _, _, runs := c.times(k + "1"); runs != 1 {
			t.Errorf("%s1 ran %d times, want once", k, runs)
		}
	}
	emptyStream(t, js, q)
}

// A cancel written over the claim of a run that took the job over releases the next
// job of its key after that run's end, not when the run it took over from (frozen
// past its lease, its claim lost before the cancel) comes back and finds the cancel.
// Worker A runs a and freezes; B takes a over and runs it; a is cancelled; A thaws,
// its renewal is refused, and it reads the cancelled record. B's run goes on for
// 1.5 s after it sees the cancel; b must start after it returns.
//
// Found by the simulation (seed 14744, 2 of 15 replays): A settled its lost run as the
// cancelled one and told b, which ran beside B's run of a. Fails with lostCause taking
// any cancel of the enqueue for this run's own.
func TestSequenceCancelOfATakenOverRunReleasesAfterTheTakeover(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "seq-cancel-taken-over"
	opts := []consumer.Option{consumer.AckWait(2 * time.Second)}
	p := newProducer(t, js, q)

	var mu sync.Mutex
	var aOnB, bStart time.Time // when B's run of a returned, when b started
	started := make(chan string, 8)
	handler := func(worker string) consumer.HandlerFunc {
		return func(ctx context.Context, j *consumer.Job) error {
			started <- worker + ":" + j.ID()
			if j.ID() == "b" {
				mu.Lock()
				bStart = time.Now()
				mu.Unlock()
				return nil
			}
			<-ctx.Done()
			if worker == "B" {
				time.Sleep(1500 * time.Millisecond) // a step it finishes before it looks at its context
				mu.Lock()
				aOnB = time.Now()
				mu.Unlock()
			}
			return ctx.Err()
		}
	}
	wait := func(what string) {
		t.Helper()
		for {
			select {
			case got := <-started:
				if got == what {
					return
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s did not start within 30 s", what)
			}
		}
	}

	px := testenv.StartProxy(t, env.URL())
	jsA, err := jetstream.New(px.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	wA := newWorker(t, jsA, q, handler("A"), append(opts, consumer.Name("A"), consumer.Concurrency(1), consumer.Prefetch(0))...)
	runWorker(t, wA)
	ctx := testenv.Context(t, 60*time.Second)
	for _, id := range []string{"a", "b"} {
		if _, err := p.Enqueue(ctx, nil, producer.ID(id), producer.Sequence("k")); err != nil {
			t.Fatal(err)
		}
	}
	wait("A:a")
	px.Pause() // A freezes: its claim's lease runs out
	wB := newWorker(t, js, q, handler("B"), append(opts, consumer.Name("B"), consumer.Concurrency(2))...)
	runWorker(t, wB)
	wait("B:a")
	if _, err := p.Cancel(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	px.Resume() // A's renewal is refused, and it finds the cancel

	recs := waitEnded(t, p, []string{"a", "b"})
	if recs["a"].State != producer.StateCancelled || recs["b"].State != producer.StateDone {
		t.Fatalf("a %s, b %s; want cancelled, done", recs["a"].State, recs["b"].State)
	}
	mu.Lock()
	defer mu.Unlock()
	if aOnB.IsZero() || !bStart.After(aOnB) {
		t.Errorf("b started at %s, B's run of a returned at %s; want b after it", bStart.Format("15:04:05.000"), aOnB.Format("15:04:05.000"))
	}
}
