package consumer_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// ---- issue test 6: the server goes away mid-run ----

// Not parallel: its leak check counts the goroutines of package consumer in the whole
// process, so it runs alone, before the parallel tests start.
func TestRestartServerMidRunEveryJobDoneOnce(t *testing.T) {
	env := testenv.Start(t) // file storage in tmpfs: survives Restart
	js := env.JetStream(t)
	p := newProducer(t, js, "rs")
	const n = 1000
	ids := enqueueN(t, p, n, "rj")
	baseline := runtime.NumGoroutine()

	var runs qaCounter
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		runs.add(j.ID())
		return nil
	})
	// AckWait bounds how long a delivery whose ack was lost in the restart waits
	// before it comes back (and is found done); keep it short for the test.
	opts := []consumer.Option{consumer.Concurrency(8), consumer.AckWait(3 * time.Second)}
	w1 := newWorker(t, js, "rs", h, append(opts, consumer.Name("w1"))...)
	w2 := newWorker(t, env.JetStream(t), "rs", h, append(opts, consumer.Name("w2"))...)
	r1 := qaStart(t, w1)
	r2 := qaStart(t, w2)

	testenv.Eventually(t, 20*time.Second, "a first share of jobs committed", func() bool { return qaCommitted(w1, w2) >= 150 })
	env.Restart(t)
	atRestart := qaCommitted(w1, w2)
	if atRestart >= n {
		t.Fatalf("all jobs were done before the restart; the test proves nothing")
	}
	t.Logf("restarted with %d of %d committed", atRestart, n)

	// The workers carry on by themselves: no new Run.
	stopProgress := qaProgress(t, []*consumer.Worker{w1, w2})
	ackDeadline := time.Now().Add(45 * time.Second)
	for qaStreamMsgs(t, js, "WORKQ_rs") != 0 || qaCommitted(w1, w2) < n {
		if time.Now().After(ackDeadline) {
			// Say where the jobs are: the consumer's view and each worker's.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if c, err := js.Consumer(ctx, "WORKQ_rs", "workers"); err == nil {
				ci, _ := c.Info(ctx)
				t.Logf("consumer: pending %d, ack pending %d, redelivered %d, waiting pulls %d, delivered %+v, ack floor %+v",
					ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.Delivered, ci.AckFloor)
			}
			t.Logf("w1 %+v health %v", w1.Stats(), w1.Health())
			t.Logf("w2 %+v health %v", w2.Stats(), w2.Health())
			t.Logf("goroutines:\n%s", strings.Join(qaWorkerGoroutines(), "\n\n"))
			t.Fatalf("timed out after 45s waiting for every job acked: %d left", qaStreamMsgs(t, js, "WORKQ_rs"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopProgress()
	for _, r := range []*qaRun{r1, r2} {
		if _, err := r.stop(t, 10*time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	s1, s2 := w1.Stats(), w2.Stats()
	t.Logf("w1 %+v", s1)
	t.Logf("w2 %+v", s2)
	if s1.Committed+s2.Committed <= atRestart {
		t.Fatal("nothing committed after the restart")
	}
	if got := s1.Committed + s2.Committed; got != n {
		t.Fatalf("committed %d times for %d jobs (reassigned %d)", got, n, s1.Reassigned+s2.Reassigned)
	}
	qaCheckAllDone(t, p, ids, &runs)
	if s1.Dead+s2.Dead != 0 {
		t.Fatalf("dead letters after a restart: %d", s1.Dead+s2.Dead)
	}

	// Leak check: once Run returned, no goroutine of the worker or of its pull is left.
	// (The server's own goroutines change across a restart, so a bare count would not do.)
	var leaked []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		if leaked = qaWorkerGoroutines(); len(leaked) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(leaked) > 0 {
		t.Fatalf("%d worker goroutines left after Run returned (%d goroutines now, %d before the workers):\n%s",
			len(leaked), runtime.NumGoroutine(), baseline, strings.Join(leaked, "\n\n"))
	}
}

// qaWorkerGoroutines returns the stacks of goroutines running package consumer's code
// or a JetStream pull iterator.
func qaWorkerGoroutines() []string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "testing.(*T).Parallel(") {
			continue // a parallel test of package consumer, paused until the serial ones end
		}
		if strings.Contains(g, "github.com/workq/workq/consumer.") || strings.Contains(g, "jetstream.(*pullSubscription)") {
			out = append(out, g)
		}
	}
	return out
}

func TestRestartClusterStreamLeaderLossEveryJobDoneOnce(t *testing.T) {
	t.Parallel()
	qaClusterNodeLoss(t, "cq", func(cl *testenv.TestCluster) int { return cl.StreamLeader("WORKQ_cq") }, 0)
}

// The node leading the workers' consumer goes away: pull requests parked on it are
// lost with it, and the workers must notice and pull from the new leader promptly,
// not after the client's default pull expiry (30 s).
func TestRestartClusterConsumerLeaderLossWorkersResume(t *testing.T) {
	t.Parallel()
	qaClusterNodeLoss(t, "cc", func(cl *testenv.TestCluster) int {
		for i := range cl.Size() {
			if s := cl.Node(i); s != nil && s.JetStreamIsConsumerLeader("$G", "WORKQ_cc", "workers") {
				return i
			}
		}
		return -1
	}, 15*time.Second)
}

// qaClusterNodeLoss runs 500 jobs on an R3 queue with three workers, stops the node
// victim picks once some are done, and checks every job ends done, committed exactly
// once. With resumeWithin > 0, the workers must start new jobs within that time of
// the stop.
func qaClusterNodeLoss(t *testing.T, q string, victim func(*testenv.TestCluster) int, resumeWithin time.Duration) {
	cl := testenv.StartCluster(t, 3)
	js := cl.JetStream(t)
	p := newProducer(t, js, q, producer.Replicas(3))
	const n = 500
	ids := enqueueN(t, p, n, "cj")

	var runs qaCounter
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		runs.add(j.ID())
		return nil
	})
	opts := []consumer.Option{consumer.Concurrency(8), consumer.AckWait(5 * time.Second)}
	var ws []*consumer.Worker
	for i := range 3 {
		ws = append(ws, newWorker(t, cl.JetStream(t), q, h, append(opts, consumer.Name(fmt.Sprint("cw", i)))...))
	}
	var runsOf []*qaRun
	for _, w := range ws {
		runsOf = append(runsOf, qaStart(t, w))
	}

	testenv.Eventually(t, 30*time.Second, "a first share of jobs committed", func() bool { return qaCommitted(ws...) >= 100 })
	node := victim(cl)
	if node < 0 {
		t.Fatal("no node to stop")
	}
	streamLeader := cl.StreamLeader("WORKQ_" + q)
	cl.Stop(node)
	stopped := time.Now()
	startedAtStop := uint64(0)
	for _, w := range ws {
		startedAtStop += w.Stats().Started
	}
	atStop := qaCommitted(ws...)
	if atStop >= n-50 {
		t.Fatal("(nearly) all jobs were done before the node stopped; the test proves nothing")
	}
	t.Logf("stopped n%d (stream leader was n%d) with %d of %d committed", node, streamLeader, atStop, n)
	stopProgress := qaProgress(t, ws)
	if resumeWithin > 0 {
		testenv.Eventually(t, resumeWithin, "the workers to start new jobs after the node stopped", func() bool {
			var started uint64
			for _, w := range ws {
				started += w.Stats().Started
			}
			return started >= startedAtStop+50
		})
		t.Logf("resumed %s after the stop", time.Since(stopped).Round(time.Millisecond))
	}
	testenv.Eventually(t, 60*time.Second, "every job acked", func() bool { return qaStreamMsgs(t, js, "WORKQ_"+q) == 0 })
	stopProgress()
	for _, r := range runsOf {
		if _, err := r.stop(t, 20*time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	var reassigned, dead uint64
	for _, w := range ws {
		s := w.Stats()
		t.Logf("%s %+v", w.Name(), s)
		reassigned += s.Reassigned
		dead += s.Dead
	}
	t.Logf("all acked %s after the stop", time.Since(stopped).Round(time.Millisecond))
	if dead != 0 {
		t.Fatalf("%d dead letters", dead)
	}
	// Every record done (each by a run that returned nil) ...
	recs := qaCheckAllDone(t, p, ids, &runs)
	// ... and each commit counted once: no commit is lost from the counts or reported
	// as "reassigned" when it went through.
	if got := qaCommitted(ws...); got != n {
		var twice []string
		for _, id := range ids {
			if runs.get(id) > 1 {
				twice = append(twice, fmt.Sprintf("%s(runs %d, record attempt %d by %s)", id, runs.get(id), recs[id].Attempt, recs[id].Worker.Name))
			}
		}
		t.Fatalf("committed %d times for %d done jobs (reassigned %d); jobs run more than once: %v", got, n, reassigned, twice)
	}
}

// qaProgress logs every second how many runs each worker started, until stopped, so
// that a slow recovery shows who stalled and for how long.
func qaProgress(t *testing.T, ws []*consumer.Worker) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			line := fmt.Sprintf("%5.1fs started:", time.Since(start).Seconds())
			for _, w := range ws {
				s := w.Stats()
				line += fmt.Sprintf(" %s=%d(c%d e%d)", w.Name(), s.Started, s.Committed, s.Errors)
			}
			t.Log(line)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-finished }) }
	t.Cleanup(stop)
	return stop
}

// The workers' consumer disappears while a worker runs (deleted by an operator, or
// lost with a server's state): the worker re-creates it and goes on with the jobs
// enqueued since, by itself.
func TestConsumerDeletedWorkerRecreatesIt(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "cdel"
	p := newProducer(t, js, q)
	w := newWorker(t, js, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }),
		consumer.AckWait(2*time.Second))
	runWorker(t, w)
	enqueueN(t, p, 20, "before")
	testenv.Eventually(t, 20*time.Second, "the first jobs committed", func() bool { return w.Stats().Committed == 20 })

	ctx := testenv.Context(t, 10*time.Second)
	if err := js.DeleteConsumer(ctx, "WORKQ_"+q, "workers"); err != nil {
		t.Fatal(err)
	}
	ids := enqueueN(t, p, 20, "after")
	testenv.Eventually(t, 30*time.Second, "the jobs enqueued after the deletion committed", func() bool {
		return w.Stats().Committed == 40
	})
	if _, err := js.Consumer(ctx, "WORKQ_"+q, "workers"); err != nil {
		t.Fatalf("the workers' consumer was not re-created: %v", err)
	}
	for _, id := range ids {
		if r := status(t, p, id); r.State != producer.StateDone {
			t.Fatalf("job %s: %+v, want done", id, r)
		}
	}
}
