package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// proxiedJS connects through a fault-injection proxy to env.
func proxiedJS(t *testing.T, env *testenv.Env) (jetstream.JetStream, *testenv.Proxy) {
	t.Helper()
	px := testenv.StartProxy(t, env.URL())
	return px.JetStream(t), px
}

// pendingMessages is how many jobs the queue's stream still holds.
func pendingMessages(t *testing.T, js jetstream.JetStream, q string) uint64 {
	t.Helper()
	s, err := js.Stream(testenv.Context(t, 5*time.Second), "WORKQ_"+q)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(testenv.Context(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// A worker cut off from the server past AckWait loses its job to another worker. When
// it comes back and finishes, its commit is refused and logged as reassigned, it does
// not ack (the job stays in the stream while the new owner runs it), and the new owner
// commits the only result. The job's first redelivery goes to the live worker: the
// frozen worker's open pull request has expired by then (see pullTimes).
func TestStalledWorkerCommitIsRefused(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	jsA, px := proxiedJS(t, env)
	const q = "stall"
	p := newProducer(t, js, q)
	opts := []consumer.Option{consumer.AckWait(2 * time.Second), consumer.Concurrency(1)}

	aStarted, aRelease := make(chan uint64, 1), make(chan struct{})
	logsA := &logRecorder{}
	wA, err := consumer.New(testenv.Context(t, 10*time.Second), jsA, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		token, _ := j.FencingToken(ctx)
		aStarted <- token
		<-aRelease
		j.SetResult([]byte("A"))
		return nil
	}), append(opts, consumer.Name("A"), consumer.Logger(slog.New(logsA)))...)
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, wA)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("x"), producer.ID("job-1")); err != nil {
		t.Fatal(err)
	}
	tokenA := <-aStarted
	px.Pause()             // A is now cut off: no heartbeat reaches the server
	var releaseA sync.Once // A's handler must return however the test ends
	t.Cleanup(func() { releaseA.Do(func() { close(aRelease) }) })

	bStarted, bRelease := make(chan uint64, 1), make(chan struct{})
	wB := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		token, _ := j.FencingToken(ctx)
		bStarted <- token
		select { // released by the test, or stopped with the worker when the test fails early
		case <-bRelease:
		case <-ctx.Done():
			return ctx.Err()
		}
		j.SetResult([]byte("B"))
		return nil
	}), append(opts, consumer.Name("B"))...)
	runWorker(t, wB)
	var tokenB uint64
	select {
	case tokenB = <-bStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("job was not redelivered to B after A stopped heartbeating")
	}
	if tokenB <= tokenA {
		t.Fatalf("B's fencing token %d is not above A's %d", tokenB, tokenA)
	}
	if r := status(t, p, "job-1"); r.State != producer.StateRunning || r.Worker.Name != "B" || r.Attempt != 2 || r.Run == "" {
		t.Fatalf("record while B runs (want attempt 2, B's run): %+v", r)
	}

	// A comes back and finishes while B still runs.
	releaseA.Do(func() { close(aRelease) })
	px.Resume()
	testenv.Eventually(t, 10*time.Second, "A's commit to be refused", func() bool { return wA.Stats().Reassigned == 1 })
	// The worker counts the refusal before it logs it: wait for the line.
	testenv.Eventually(t, 5*time.Second, "A to log the reassignment", func() bool { return logsA.has("job job-1 was reassigned") })
	// A neither committed nor acked: the job is still in the stream, still B's.
	if n := pendingMessages(t, js, q); n != 1 {
		t.Fatalf("stream holds %d jobs after A's refused commit, want 1 (B still runs it)", n)
	}
	if r := status(t, p, "job-1"); r.State != producer.StateRunning || r.Worker.Name != "B" {
		t.Fatalf("record after A's refused commit: %+v", r)
	}

	close(bRelease)
	testenv.Eventually(t, 10*time.Second, "B's commit", func() bool { return status(t, p, "job-1").State == producer.StateDone })
	testenv.Eventually(t, 10*time.Second, "the job to leave the stream", func() bool { return pendingMessages(t, js, q) == 0 })
	r := status(t, p, "job-1")
	if string(r.Result) != "B" || r.Worker.Name != "B" || r.Revision <= tokenB {
		t.Fatalf("final record %+v", r)
	}
	if sa, sb := wA.Stats(), wB.Stats(); sa.Committed != 0 || sb.Committed != 1 {
		t.Fatalf("commits: A %d, B %d; want 0 and 1", sa.Committed, sb.Committed)
	}
}

// A superseded worker learns it from its heartbeat: its handler's context ends with
// ErrStale as the cause, and whatever it returns is not committed.
func TestSupersededHandlerContextIsCancelled(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	jsA, px := proxiedJS(t, env)
	const q = "cancel"
	p := newProducer(t, js, q)
	opts := []consumer.Option{consumer.AckWait(time.Second), consumer.Concurrency(1)}

	aStarted, aCause := make(chan struct{}, 1), make(chan error, 1)
	wA := newWorker(t, jsA, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		aStarted <- struct{}{}
		<-ctx.Done()
		aCause <- context.Cause(ctx)
		return nil // pretend it finished anyway: the commit must still be refused
	}), append(opts, consumer.Name("A"))...)
	runWorker(t, wA)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID("c1")); err != nil {
		t.Fatal(err)
	}
	<-aStarted
	px.Pause()
	wB := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		j.SetResult([]byte("B"))
		return nil
	}), append(opts, consumer.Name("B"))...)
	runWorker(t, wB)
	testenv.Eventually(t, 10*time.Second, "B's commit", func() bool { return status(t, p, "c1").State == producer.StateDone })
	px.Resume()
	select {
	case cause := <-aCause:
		if !errors.Is(cause, consumer.ErrStale) {
			t.Fatalf("A's context ended with %v, want ErrStale", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A's handler context was not cancelled after it lost the job")
	}
	testenv.Eventually(t, 5*time.Second, "A to count the reassignment", func() bool { return wA.Stats().Reassigned == 1 })
	if r := status(t, p, "c1"); string(r.Result) != "B" {
		t.Fatalf("result %q, want B's", r.Result)
	}
}

// A worker killed mid-job (its connection gone) loses the job after AckWait; another
// worker runs it as attempt 2 and commits.
func TestKilledWorkerJobIsRedelivered(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "killed"
	p := newProducer(t, js, q)
	opts := []consumer.Option{consumer.AckWait(time.Second), consumer.Concurrency(1)}
	aStarted, dieA := doomedWorker(t, env, q, opts)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID("k1")); err != nil {
		t.Fatal(err)
	}
	<-aStarted
	testenv.Eventually(t, 5*time.Second, "A's claim", func() bool {
		r, err := p.Status(testenv.Context(t, 5*time.Second), "k1")
		return err == nil && r.State == producer.StateRunning && r.Worker.Name == "A"
	})
	dieA() // the process "dies": nothing more from A reaches the server

	var attempts []int
	wB := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		attempts = append(attempts, j.Attempt())
		return nil
	}), append(opts, consumer.Name("B"))...)
	stopB := runWorker(t, wB)
	testenv.Eventually(t, 10*time.Second, "B's commit", func() bool { return status(t, p, "k1").State == producer.StateDone })
	stopB()
	if len(attempts) != 1 || attempts[0] != 2 {
		t.Fatalf("B ran attempts %v, want [2]", attempts)
	}
}

// A worker that committed but crashed before its ack landed: the job is redelivered,
// the record says done, and the job is acked without running again. The crashed
// worker is played by a raw pull from the queue's consumer that writes the committed
// record (in the documented format) and never acks.
func TestCommittedButUnackedJobIsNotRunAgain(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "unacked"
	p := newProducer(t, js, q)
	ran := make(chan string, 1)
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		ran <- j.ID()
		return nil
	}), consumer.AckWait(time.Second), consumer.Concurrency(1))
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID("u1")); err != nil {
		t.Fatal(err)
	}

	ctx := testenv.Context(t, 20*time.Second)
	cons, err := js.Consumer(ctx, "WORKQ_"+q, "workers")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	msg := <-batch.Messages()
	if msg == nil {
		t.Fatal("no delivery for the crashed worker")
	}
	md, _ := msg.Metadata()
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	rec := producer.Record{ID: "u1", Queue: q, State: producer.StateDone, Attempt: 1, Enqueue: msg.Headers().Get("Workq-Enqueue"),
		Run: "crashed-run", Sequence: md.Sequence.Stream, Result: []byte("first"), FinishedAt: time.Now()}
	b, _ := json.Marshal(rec)
	if _, err := kv.Create(ctx, "u1", b); err != nil {
		t.Fatal(err)
	}
	// ...and the crashed worker never acks.

	stop := runWorker(t, w)
	testenv.Eventually(t, 10*time.Second, "the redelivery to be acked", func() bool { return w.Stats().AlreadyDone == 1 })
	testenv.Eventually(t, 5*time.Second, "the job to leave the stream", func() bool { return pendingMessages(t, js, q) == 0 })
	stop()
	select {
	case id := <-ran:
		t.Fatalf("handler ran job %s again after it was committed", id)
	default:
	}
	if r := status(t, p, "u1"); r.State != producer.StateDone || string(r.Result) != "first" {
		t.Fatalf("record changed: %+v", r)
	}
}
