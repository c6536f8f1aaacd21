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

// How soon a job whose worker died runs again. A lease is judged by the clock of the
// server that stores the records, so any worker takes over once the holder's last
// renewal is a lease old, and a copy that finds the lease live is put back, never
// held: takeover comes about one AckWait after the holder's death, whoever gets the
// job, whatever its handler slots are doing. Before, a worker took over only after it
// had itself watched the claim stand a whole lease (1.8 AckWaits after one kill), a
// watched copy waited for a handler slot of its watcher, and watchers that died in
// turn never took the job over.

const takeoverAckWait = 2 * time.Second

// starts records when each run of job id began, on which worker, at which attempt.
type starts struct {
	mu   sync.Mutex
	runs []start
}

type start struct {
	at      time.Time
	worker  string
	attempt int
}

func (s *starts) add(worker string, j *consumer.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs = append(s.runs, start{time.Now(), worker, j.Attempt()})
}

// firstAfter is the first run at attempt > 1 that began after t.
func (s *starts) firstAfter(t time.Time) (start, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runs {
		if r.attempt > 1 && r.at.After(t) {
			return r, true
		}
	}
	return start{}, false
}

// holdJob enqueues job id and waits until killable worker "A" runs it; it returns A's
// death.
func holdJob(t *testing.T, env *testenv.Env, p *producer.Producer, q, id string, runs *starts) (dieA func()) {
	t.Helper()
	dieA = killableWorker(t, env, q, "A", func(j *consumer.Job) { runs.add("A", j) }, []consumer.Option{consumer.AckWait(takeoverAckWait), consumer.Concurrency(1)})
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID(id)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "A's claim", func() bool {
		r := status(t, p, id)
		return r.State == producer.StateRunning && r.Worker.Name == "A"
	})
	return dieA
}

// recordingWorker is worker name, whose handler records each run in runs and
// succeeds.
func recordingWorker(t *testing.T, js jetstream.JetStream, q, name string, runs *starts, opts ...consumer.Option) *consumer.Worker {
	t.Helper()
	return newWorker(t, js, q, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		runs.add(name, j)
		return nil
	}), append([]consumer.Option{consumer.AckWait(takeoverAckWait), consumer.Name(name)}, opts...)...)
}

// tookOver waits for the first run after the kill at killed, and fails unless it came
// within bound.
func tookOver(t *testing.T, runs *starts, killed time.Time, bound time.Duration) {
	t.Helper()
	var r start
	testenv.Eventually(t, 30*time.Second, "the job taken over", func() bool {
		var ok bool
		r, ok = runs.firstAfter(killed)
		return ok
	})
	took := r.at.Sub(killed)
	t.Logf("taken over by %s at attempt %d, %s (%.2f AckWait) after the holder's death", r.worker, r.attempt, took.Round(time.Millisecond), float64(took)/float64(takeoverAckWait))
	if took > bound {
		t.Fatalf("taken over %s after the holder's death, want at most %s", took, bound)
	}
}

// One kill: another worker, idle, runs the job within 1.5 AckWait.
func TestTakeoverAfterOneKill(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q, id = "takeover1", "t1"
	p := newProducer(t, js, q)
	var runs starts
	dieA := holdJob(t, env, p, q, id, &runs)
	runWorker(t, recordingWorker(t, js, q, "B", &runs))
	killed := time.Now()
	dieA()
	tookOver(t, &runs, killed, takeoverAckWait*3/2)
	testenv.Eventually(t, 10*time.Second, "the job done", func() bool { return status(t, p, id).State == producer.StateDone })
}

// A copy of the held job reaches worker W1, whose only handler slot then runs a long
// job; W2 sits idle. The job is taken over within 2.5 AckWait of the holder's death,
// and the copy does not wait for W1's slot: it is put back, and the stream keeps only
// the long job once the held one is done. (W1 buffers nothing beyond its slot,
// Prefetch(0): a worker's buffer keeps what it fetched for its own slots by design,
// and this is about the watch, not the buffer.)
func TestTakeoverWhileTheWatchersSlotIsBusy(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q, id = "takeoverbusy", "t2"
	p := newProducer(t, js, q)
	var runs starts
	dieA := holdJob(t, env, p, q, id, &runs)

	long := make(chan struct{})
	w1 := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if j.ID() == "long" {
			select {
			case <-long:
			case <-ctx.Done():
			}
			return nil
		}
		runs.add("W1", j)
		return nil
	}), consumer.AckWait(takeoverAckWait), consumer.Concurrency(1), consumer.Prefetch(0), consumer.Name("W1"))
	runWorker(t, w1)
	t.Cleanup(func() { close(long) }) // before W1 stops (cleanups run last first)
	// The copy: the job's enqueue, stored again (as a server that forgot it would).
	enqueue := status(t, p, id).Enqueue
	copyMsg := &nats.Msg{Subject: "workq." + q + ".jobs." + id, Header: nats.Header{"Workq-Enqueue": {enqueue}}}
	if _, err := js.PublishMsg(testenv.Context(t, 5*time.Second), copyMsg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "W1 to see the copy held by A", func() bool { return w1.Stats().Watched >= 1 })
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), nil, producer.ID("long")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "W1 busy with the long job", func() bool { return status(t, p, "long").State == producer.StateRunning })

	runWorker(t, recordingWorker(t, js, q, "W2", &runs))
	killed := time.Now()
	dieA()
	tookOver(t, &runs, killed, takeoverAckWait*5/2)
	testenv.Eventually(t, 10*time.Second, "the job done", func() bool { return status(t, p, id).State == producer.StateDone })
	testenv.Eventually(t, 3*takeoverAckWait, "the copy acked while W1's slot is still busy", func() bool {
		return qaStreamMsgs(t, js, "WORKQ_"+q) == 1
	})
	if r := status(t, p, "long"); r.State != producer.StateRunning {
		t.Fatalf("the long job is %s: W1's slot was not busy throughout", r.State)
	}
}

// Watchers that die in turn, each 1.7 AckWait into its life: the job is taken over
// within 3 AckWait of the holder's death, and ends once the kills stop.
func TestTakeoverWhileWatchersKeepDying(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q, id = "takeoverkills", "t3"
	p := newProducer(t, js, q)
	var runs starts
	dieA := holdJob(t, env, p, q, id, &runs)
	opts := []consumer.Option{consumer.AckWait(takeoverAckWait), consumer.Concurrency(1)}
	killed := time.Now()
	dieA()
	for i := range 5 {
		name := "B" + string(rune('1'+i))
		die := killableWorker(t, env, q, name, func(j *consumer.Job) { runs.add(name, j) }, opts)
		time.Sleep(takeoverAckWait * 17 / 10) // its life: the kills come on a schedule, not on a condition
		die()
	}
	tookOver(t, &runs, killed, 3*takeoverAckWait)
	runWorker(t, recordingWorker(t, js, q, "final", &runs, consumer.Concurrency(1)))
	testenv.Eventually(t, 4*takeoverAckWait, "the job done once the kills stopped", func() bool { return status(t, p, id).State == producer.StateDone })
}
