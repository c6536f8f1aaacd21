package consumer_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// On a 3-node cluster, the stream leader of an R3 queue stops while an @every 1s
// schedule fires and delayed jobs come due, and comes back: a new leader fires
// what was due, every firing runs exactly once (a copy the server fired twice is
// dropped by the worker that gets it), and every delayed job runs once.
func TestScheduleSurvivesLeaderFailover(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, 3)
	const q = "sched-r3"
	p := newProducer(t, cl.JetStream(t), q, producer.Replicas(3))
	ctx := testenv.Context(t, 90*time.Second)
	st := newStarted()
	var ws []*consumer.Worker
	for i := range 3 {
		w := newWorker(t, cl.JetStream(t), q, st.handler(), consumer.Name(fmt.Sprint("w", i)), consumer.AckWait(5*time.Second))
		runWorker(t, w)
		ws = append(ws, w)
	}
	if _, err := p.Schedule(ctx, "tick", "@every 1s", []byte("tick")); err != nil {
		t.Fatal(err)
	}
	// Delayed jobs due every 500ms over the next 8 s: some before the stop, some
	// during the election, some after.
	var delayed []string
	start := time.Now()
	for i := range 16 {
		id := fmt.Sprint("later-", i)
		delayed = append(delayed, id)
		if _, err := p.Enqueue(ctx, []byte(id), producer.ID(id), producer.At(start.Add(2*time.Second+time.Duration(i)*500*time.Millisecond))); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 20*time.Second, "3 firings run", func() bool { return len(firings(st)) >= 3 })
	leader := cl.StreamLeader("WORKQ_" + q)
	if leader < 0 {
		t.Fatal("no stream leader")
	}
	cl.Stop(leader)
	stopped := time.Now()
	t.Logf("stopped the stream leader n%d after %d firings", leader, len(firings(st)))
	testenv.Eventually(t, 30*time.Second, "a new stream leader", func() bool {
		l := cl.StreamLeader("WORKQ_" + q)
		return l >= 0 && l != leader
	})
	t.Logf("new leader n%d after %s", cl.StreamLeader("WORKQ_"+q), time.Since(stopped).Round(time.Millisecond))
	cl.Restart(t, leader)
	atRestart := len(firings(st))
	testenv.Eventually(t, 20*time.Second, "4 more firings after the node came back", func() bool { return len(firings(st)) >= atRestart+4 })
	if err := p.RemoveSchedule(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "every delayed job run", func() bool {
		ids := st.ids()
		for _, id := range delayed {
			if ids[id] == 0 {
				return false
			}
		}
		return true
	})
	testenv.Eventually(t, 30*time.Second, "the jobs stream empty", func() bool { return qaStreamMsgs(t, cl.JetStream(t), "WORKQ_"+q) == 0 })

	ids := st.ids()
	for id, n := range ids {
		if n != 1 {
			t.Errorf("job %s ran %d times", id, n)
		}
	}
	fs := firings(st)
	var gaps []string
	for i := 1; i < len(fs); i++ {
		if d := fs[i].Sub(fs[i-1]); d != time.Second {
			gaps = append(gaps, fmt.Sprintf("%s→%s", fs[i-1].Format("15:04:05"), fs[i].Format("15:04:05")))
		}
	}
	var dropped uint64
	for _, w := range ws {
		dropped += w.Stats().AlreadyDone
	}
	t.Logf("%d firings, each run once; gaps (the election): %v; copies dropped as already done: %d", len(fs), gaps, dropped)
	if len(gaps) > 1 {
		t.Errorf("firings skipped more than once: %v", gaps)
	}
}

// firings are the times of the tick schedule's firings that ran, in order.
func firings(st *started) []time.Time {
	var out []time.Time
	for id := range st.ids() {
		if at, ok := strings.CutPrefix(id, "tick/"); ok {
			t, err := time.Parse("20060102T150405Z", at)
			if err == nil {
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}
