package consumer_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/metrics"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Queue info and the queue collector count the jobs waiting in sequences, their keys
// and the oldest of them, from the links alone; a halted job does not count (the job
// behind it does), and the counts return to 0 once every job ended: the links' delete
// markers expire.
func TestSequenceBacklogCounts(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "seq-backlog"
	s := newSeqRecorder()
	gates := map[string]chan struct{}{"a1": make(chan struct{}), "b1": make(chan struct{})}
	for id, g := range gates {
		s.gate[id] = g
	}
	s.dead["d1"] = true
	p := newProducer(t, js, q)
	runWorker(t, newWorker(t, js, q, s, consumer.Concurrency(8)))
	a, err := admin.New(js)
	if err != nil {
		t.Fatal(err)
	}
	c, err := producer.NewQueueCollector(js, []string{q}, producer.CollectorCache(0))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	ctx := testenv.Context(t, 60*time.Second)
	enqueue := func(id, key string, opts ...producer.EnqueueOption) {
		t.Helper()
		if _, err := p.Enqueue(ctx, nil, append([]producer.EnqueueOption{producer.ID(id), producer.Sequence(key)}, opts...)...); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("a1", "ka")
	testenv.Eventually(t, 10*time.Second, "a1 to run", func() bool { return status(t, p, "a1").State == producer.StateRunning })
	beforeA2 := time.Now()
	enqueue("a2", "ka")
	afterA2 := time.Now()
	enqueue("a3", "ka")
	enqueue("b1", "kb")
	enqueue("b2", "kb")
	enqueue("c1", "kc") // runs alone: nothing waits in kc
	enqueue("d1", "kd") // dies: d2 halts, d3 waits behind it
	enqueue("d2", "kd", producer.HaltOnDead())
	enqueue("d3", "kd")
	waitEnded(t, p, []string{"c1", "d1"})
	testenv.Eventually(t, 10*time.Second, "d2 to halt", func() bool { return status(t, p, "d2").Halted })

	want := func(what string, jobs, keys int, oldest bool) {
		t.Helper()
		var qi *admin.QueueInfo
		testenv.Eventually(t, 10*time.Second, what, func() bool {
			if qi, err = a.Queue(ctx, q); err != nil {
				t.Fatal(err)
			}
			return qi.SequenceWaiting == jobs && qi.SequenceKeys == keys
		})
		if !oldest {
			if !qi.SequenceOldest.IsZero() {
				t.Fatalf("%s: oldest waiting %s; want none", what, qi.SequenceOldest)
			}
			return
		}
		// a2 waits longest: its link was written during its enqueue.
		if o := qi.SequenceOldest; o.Before(beforeA2) || o.After(afterA2) {
			t.Fatalf("%s: oldest waiting at %s; want a2's enqueue, between %s and %s", what, o, beforeA2, afterA2)
		}
		for name, v := range map[string]float64{"workq_queue_sequence_waiting": float64(jobs), "workq_queue_sequence_keys": float64(keys)} {
			got, err := metrics.Value(reg, name, "queue", q)
			if err != nil || got != v {
				t.Fatalf("%s: %s %v, %v; want %v", what, name, got, err, v)
			}
		}
		age, err := metrics.Value(reg, "workq_queue_sequence_oldest_waiting_seconds", "queue", q)
		if err != nil || age < time.Since(afterA2).Seconds()-1 || age > time.Since(beforeA2).Seconds()+1 {
			t.Fatalf("%s: oldest waiting age %v s, %v; want a2's", what, age, err)
		}
	}
	// a2, a3 behind a1; b2 behind b1; d3 behind the halted d2.
	want("the backlog while a1 and b1 run", 4, 3, true)

	close(gates["a1"])
	close(gates["b1"])
	if _, err := p.ResumeSequence(ctx, "kd"); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, p, []string{"a2", "a3", "b2", "d2", "d3"})
	want("the backlog once every job ended", 0, 0, false)
	for _, name := range []string{"workq_queue_sequence_waiting", "workq_queue_sequence_keys", "workq_queue_sequence_oldest_waiting_seconds"} {
		if v, err := metrics.Value(reg, name, "queue", q); err != nil || v != 0 {
			t.Fatalf("%s after every job ended: %v, %v", name, v, err)
		}
	}
	// A link whose job ended (as a server's crash can bring one back) waits for
	// nothing: not counted.
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "==.next.ka.a1", []byte(`{"job":"a2"}`)); err != nil {
		t.Fatal(err)
	}
	if qi, err := a.Queue(ctx, q); err != nil || qi.SequenceWaiting != 0 || qi.SequenceKeys != 0 || !qi.SequenceOldest.IsZero() {
		t.Fatalf("with a link of an ended job: %+v, %v; want nothing waiting", qi, err)
	}
}
