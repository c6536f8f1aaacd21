package producer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/metrics"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

func gauge(t *testing.T, g prometheus.Gatherer, name, q string) float64 {
	t.Helper()
	v, err := metrics.Value(g, name, "queue", q)
	if err != nil {
		t.Fatalf("gather %s: %v", name, err)
	}
	return v
}

func collectorOn(t *testing.T, js jetstream.JetStream, queues []string, opts ...producer.CollectorOption) (*producer.QueueCollector, *prometheus.Registry) {
	t.Helper()
	c, err := producer.NewQueueCollector(js, queues, opts...)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return c, reg
}

// The collector reports a queue's state as the server has it: 5 jobs, 2 of them
// delivered twice and unacknowledged, 2 dead letters; an empty queue; a missing one.
func TestQueueCollectorValues(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	const q = "coll"
	p := mustNew(t, js, q)
	mustNew(t, js, "coll-empty")
	before := time.Now()
	for range 5 {
		if _, err := p.Enqueue(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := js.Publish(ctx, "workq."+q+".dead", []byte("dead")); err != nil {
			t.Fatal(err)
		}
	}
	_, reg := collectorOn(t, js, []string{q, "coll-empty", "coll-missing"}, producer.CollectorCache(0))
	// No worker yet: every job is pending.
	if got := gauge(t, reg, "workq_queue_pending", q); got != 5 {
		t.Errorf("pending before any worker: %v, want 5", got)
	}

	// Create the workers' consumer, take two jobs, hand them back, take them again.
	noop := consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil })
	if _, err := consumer.New(ctx, js, q, noop, consumer.AckWait(time.Minute)); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, "WORKQ_"+q, "workers")
	if err != nil {
		t.Fatal(err)
	}
	fetch := func() []jetstream.Msg {
		b, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var msgs []jetstream.Msg
		for m := range b.Messages() {
			msgs = append(msgs, m)
		}
		if len(msgs) != 2 {
			t.Fatalf("fetched %d jobs, want 2", len(msgs))
		}
		return msgs
	}
	for _, m := range fetch() {
		// A nak sent as a request is answered once the server has processed it.
		if _, err := js.Conn().Request(m.Reply(), []byte("-NAK"), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range fetch() { // the server redelivers naked jobs first
		if md, err := m.Metadata(); err != nil || md.NumDelivered != 2 {
			t.Fatalf("fetched %v (%v), want a second delivery", md, err)
		}
	}
	after := time.Now()

	for _, c := range []struct {
		name, queue string
		want        float64
	}{
		{"workq_queue_up", q, 1},
		{"workq_queue_jobs", q, 5},
		{"workq_queue_pending", q, 3},
		{"workq_queue_ack_pending", q, 2},
		{"workq_queue_redelivered", q, 2},
		{"workq_queue_dead_letters", q, 2},
		{"workq_queue_up", "coll-empty", 1},
		{"workq_queue_jobs", "coll-empty", 0},
		{"workq_queue_pending", "coll-empty", 0},
		{"workq_queue_oldest_job_age_seconds", "coll-empty", 0},
		{"workq_queue_up", "coll-missing", 0},
	} {
		if got := gauge(t, reg, c.name, c.queue); got != c.want {
			t.Errorf("%s{queue=%q} = %v, want %v", c.name, c.queue, got, c.want)
		}
	}
	age := gauge(t, reg, "workq_queue_oldest_job_age_seconds", q)
	if maxAge := time.Since(before).Seconds(); age <= 0 || age > maxAge {
		t.Errorf("oldest job age %vs, want in (0, %vs]", age, maxAge)
	}
	if minAge := time.Since(after).Seconds(); age < minAge {
		t.Errorf("oldest job age %vs, want at least %vs", age, minAge)
	}

	// Without queue names it finds every queue on the server.
	_, all := collectorOn(t, js, nil, producer.CollectorCache(0))
	if got := gauge(t, all, "workq_queue_jobs", q); got != 5 {
		t.Errorf("discovered queue %s: jobs %v, want 5", q, got)
	}
	if got := gauge(t, all, "workq_queue_up", "coll-empty"); got != 1 {
		t.Errorf("discovered queue coll-empty: up %v, want 1", got)
	}
}

// apiCalls is the account's count of JetStream API requests so far, this one included.
func apiCalls(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	ai, err := js.AccountInfo(testenv.Context(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return ai.API.Total
}

// Scrapes in quick succession, concurrent or not, read the server once, counted by
// the server itself.
func TestQueueCollectorCaches(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	mustNew(t, js, "cached")
	_, reg := collectorOn(t, js, []string{"cached"}, producer.CollectorCache(time.Minute))
	start := apiCalls(t, js)
	// Concurrent scrapes wait for one read; later ones use it.
	var wg sync.WaitGroup
	ups := make(chan float64, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _ := metrics.Value(reg, "workq_queue_up", "queue", "cached")
			ups <- v
		}()
	}
	wg.Wait()
	close(ups)
	for up := range ups {
		if up != 1 {
			t.Fatalf("up %v, want 1", up)
		}
	}
	if got := gauge(t, reg, "workq_queue_up", "cached"); got != 1 {
		t.Fatalf("up %v, want 1", got)
	}
	// One read: stream info, consumer info (not found: no worker yet), the
	// schedules' and, without a consumer, the delayed jobs' counts, dead letters, the
	// sequences' links (none: no oldest to read).
	if n := apiCalls(t, js) - start - 1; n != 6 {
		t.Errorf("five scrapes made %d API requests, want 6 (one read)", n)
	}
}

// With the server gone a scrape returns within the collector's timeout, reporting
// the queue down, and does not hang.
func TestQueueCollectorTimeout(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	mustNew(t, js, "gone")
	const timeout = 300 * time.Millisecond
	_, reg := collectorOn(t, js, []string{"gone"}, producer.CollectorCache(0), producer.CollectorTimeout(timeout))
	if got := gauge(t, reg, "workq_queue_up", "gone"); got != 1 {
		t.Fatalf("up %v before the server stopped, want 1", got)
	}
	env.Stop()
	for range 2 {
		start := time.Now()
		done := make(chan float64, 1)
		go func() {
			v, _ := metrics.Value(reg, "workq_queue_up", "queue", "gone")
			done <- v
		}()
		select {
		case up := <-done:
			if up != 0 {
				t.Errorf("up %v with the server stopped, want 0", up)
			}
			// Slack for a loaded machine, still well below the 5s a request
			// without the collector's own deadline would wait.
			if took := time.Since(start); took > timeout+2*time.Second {
				t.Errorf("scrape took %s, timeout %s", took, timeout)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("scrape hung with the server stopped")
		}
	}
	if got := gauge(t, reg, "workq_queue_jobs", "gone"); got != 0 {
		t.Errorf("a down queue still reports jobs: %v", got)
	}
}

// Delayed jobs and periodic schedules live in the queue's stream but are not its
// jobs: the collector counts them apart, before and after the workers' consumer
// exists, and the oldest job's age is not the older schedule's.
func TestQueueCollectorCountsSchedulesApart(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	const q = "coll-sched"
	p := mustNew(t, js, q)
	if _, err := p.Schedule(ctx, "yearly", "@yearly", []byte("y")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := p.Enqueue(ctx, []byte("later"), producer.ID(fmt.Sprint("later-", i)), producer.After(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1100 * time.Millisecond) // so that the schedule is measurably older than the job
	enqueued := time.Now()
	if _, err := p.Enqueue(ctx, []byte("now")); err != nil {
		t.Fatal(err)
	}
	_, reg := collectorOn(t, js, []string{q}, producer.CollectorCache(0))
	check := func(when string) {
		t.Helper()
		for name, want := range map[string]float64{"workq_queue_jobs": 1, "workq_queue_pending": 1, "workq_queue_scheduled": 2, "workq_queue_schedules": 1} {
			if got := gauge(t, reg, name, q); got != want {
				t.Errorf("%s: %s = %v, want %v", when, name, got, want)
			}
		}
		// The job is at most as old as the time since it was enqueued; the schedule
		// is 1.1 s older than that. Half a second of slack splits them, however
		// long a loaded machine took to get here.
		if age, limit := gauge(t, reg, "workq_queue_oldest_job_age_seconds", q), time.Since(enqueued).Seconds()+0.5; age >= limit {
			t.Errorf("%s: oldest job age %vs, above the job's %.2fs: the schedule's, not the job's", when, age, limit-0.5)
		}
	}
	check("without a consumer")
	noop := consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil })
	if _, err := consumer.New(ctx, js, q, noop); err != nil {
		t.Fatal(err)
	}
	check("with the workers' consumer")
}
