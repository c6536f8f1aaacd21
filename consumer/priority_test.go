package consumer_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// startOrder records the order in which handlers start.
type startOrder struct {
	mu    sync.Mutex
	order []string
}

func (s *startOrder) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.order = append(s.order, id)
}

func (s *startOrder) snapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

// enqueueLevel enqueues n jobs of one priority level in a batch, ids prefix-<i>.
func enqueueLevel(t *testing.T, p *producer.Producer, n, level int, prefix string) {
	t.Helper()
	jobs := make([]producer.Job, n)
	for i := range jobs {
		jobs[i] = producer.Job{ID: fmt.Sprintf("%s-%d", prefix, i), Priority: level}
	}
	if _, err := p.EnqueueBatch(testenv.Context(t, 60*time.Second), jobs); err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
}

// A backlog of 10 000 low jobs, then 100 high ones while the backlog drains: every
// high job starts before the backlog's next few hundred.
func TestHighPriorityJumpsTheBacklog(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "prio-backlog"
	p := newProducer(t, js, q)
	enqueueLevel(t, p, 10_000, producer.PriorityLow, "low")

	var order startOrder
	var started atomic.Int64
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		order.add(j.ID())
		started.Add(1)
		time.Sleep(200 * time.Microsecond)
		return nil
	}), consumer.Concurrency(8))
	runWorker(t, w)
	testenv.Eventually(t, 30*time.Second, "500 low jobs started", func() bool { return started.Load() >= 500 })
	enqueueLevel(t, p, 100, producer.PriorityHigh, "high")
	stored := len(order.snapshot()) // every high job is in the stream from this start on
	testenv.Eventually(t, 30*time.Second, "every high job started", func() bool {
		n := 0
		for _, id := range order.snapshot() {
			if strings.HasPrefix(id, "high-") {
				n++
			}
		}
		return n == 100
	})

	// The low jobs that started once every high job was stored, before the last
	// high one started.
	got := order.snapshot()
	last, lowAfter := -1, 0
	for i, id := range got {
		if strings.HasPrefix(id, "high-") {
			last = i
		}
	}
	for _, id := range got[stored : last+1] {
		if strings.HasPrefix(id, "low-") {
			lowAfter++
		}
	}
	t.Logf("all 100 high jobs stored at start %d; the last started at %d; %d low jobs started in between", stored, last, lowAfter)
	// A low job starts there only when a slot frees while no high job is buffered
	// yet (a pull for the next ones is under way, or the worker has not yet sized
	// the level's buffer by the handlers' pace): 17 to 32 in runs here, while the
	// backlog runs at thousands a second. The issue asks for "before the backlog's
	// next few hundred"; 150 leaves room for a loaded machine.
	if lowAfter > 150 {
		t.Errorf("%d low jobs started while stored high jobs waited; want the high jobs first", lowAfter)
	}
}

// Strict priority is among waiting jobs only: while high jobs run and none waits, a
// low job takes a free slot.
func TestLowPriorityRunsBesideRunningHighJobs(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "prio-busy"
	p := newProducer(t, js, q)
	release := make(chan struct{})
	var highRunning, lowDone atomic.Int32
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if strings.HasPrefix(j.ID(), "high-") {
			highRunning.Add(1)
			<-release
			return nil
		}
		lowDone.Add(1)
		return nil
	}), consumer.Concurrency(4))
	runWorker(t, w)
	defer close(release)
	enqueueLevel(t, p, 3, producer.PriorityUrgent, "high")
	testenv.Eventually(t, 10*time.Second, "3 high jobs running", func() bool { return highRunning.Load() == 3 })
	enqueueLevel(t, p, 20, producer.PriorityLow, "low")
	testenv.Eventually(t, 10*time.Second, "20 low jobs done beside the running high ones", func() bool { return lowDone.Load() == 20 })
}

// A job's priority holds when it is delayed, and Status finds a waiting job at any
// level.
func TestPriorityOfDelayedAndWaitingJobs(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "prio-delayed"
	p := newProducer(t, js, q)
	ctx := testenv.Context(t, 30*time.Second)
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("waiting"), producer.Priority(producer.PriorityUrgent)); err != nil {
		t.Fatal(err)
	}
	if r := status(t, p, "waiting"); r.State != producer.StateQueued {
		t.Errorf("Status of a waiting urgent job: %+v", r)
	}
	s, err := js.Stream(ctx, "WORKQ_"+q)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := s.GetLastMsgForSubject(ctx, "workq."+q+".prio.4.waiting"); err != nil {
		t.Errorf("the urgent job is not on its level's subject: %v", err)
	} else if m.Header.Get("Nats-Msg-Id") != "waiting" {
		t.Errorf("stored %+v", m.Header)
	}
	if _, err := p.Enqueue(ctx, []byte("x"), producer.Priority(7)); err == nil {
		t.Error("priority 7 accepted")
	}

	// A delayed low job and a delayed high one due together: the worker, with one
	// slot and busy until both have fired, starts the high one first.
	due := time.Now().Add(1500 * time.Millisecond)
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("later-low"), producer.Priority(producer.PriorityLow), producer.At(due)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("later-high"), producer.Priority(producer.PriorityHigh), producer.At(due)); err != nil {
		t.Fatal(err)
	}
	var order startOrder
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		order.add(j.ID())
		if j.ID() == "waiting" {
			time.Sleep(time.Until(due) + time.Second) // holds the one slot until both fired
		}
		return nil
	}), consumer.Concurrency(1))
	runWorker(t, w)
	testenv.Eventually(t, 20*time.Second, "3 jobs started", func() bool { return len(order.snapshot()) == 3 })
	if got := strings.Join(order.snapshot(), " "); got != "waiting later-high later-low" {
		t.Errorf("start order %s; want waiting later-high later-low", got)
	}
}

// Priorities survive a server restart: the levels' jobs and consumers are kept, and a
// worker started after it takes the urgent job before the low ones enqueued first. Its
// slot waits for every level's first pull to be answered (the pulls race: the low
// level's could come back first), so the urgent job runs first.
func TestPrioritiesSurviveRestart(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "prio-restart"
	p := newProducer(t, js, q)
	// A worker creates the levels' consumers, then stops.
	w := newWorker(t, js, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }))
	stop := runWorker(t, w)
	stop()
	enqueueLevel(t, p, 20, producer.PriorityLow, "low")
	enqueueLevel(t, p, 1, producer.PriorityUrgent, "urgent")
	env.Restart(t)

	js = env.JetStream(t)
	var order startOrder
	w = newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		order.add(j.ID())
		return nil
	}), consumer.Concurrency(1))
	runWorker(t, w)
	testenv.Eventually(t, 30*time.Second, "21 jobs started", func() bool { return len(order.snapshot()) == 21 })
	if i := slices.Index(order.snapshot(), "urgent-0"); i != 0 {
		t.Errorf("the urgent job started %d-th after the restart, want first: %v", i+1, order.snapshot())
	}
}
