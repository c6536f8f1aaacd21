package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/wireid"
	"github.com/workq/workq/producer"
)

// The simulation runs the shipped code — consumer.Worker and producer.Producer, as
// users run them — on the real nats-server, all inside one testing/synctest bubble:
// every goroutine (the server's, the clients', the workers' heartbeats and timers,
// the handlers) runs on a virtual clock that moves only when all of them wait, so a
// history of minutes of AckWaits, backoffs and duplicate windows takes milliseconds.
// A seed draws the workload (jobs that work, fail, panic, outlive their lease, share
// a sequence key, are enqueued again) and the faults: workers killed, frozen past
// their lease and restarted, connections cut (with the replies on their way), the
// server killed and restarted on what it had written (it forgets recent acks,
// deliveries and message ids), and the workers' consumers deleted. Every history is
// checked against the invariants of docs/delivery.md (check_test.go).
//
// The seed fixes the workload and the faults, and when they strike on the virtual
// clock; the order of goroutines within one instant is the Go scheduler's, so a
// failing seed mostly, not always, fails again on replay. A failure prints its
// history.
//
// go test ./internal/sim -seeds 2000 runs more (-first N: from seed N); -seed N
// replays one.

var (
	seeds   = flag.Int("seeds", 0, "simulation seeds to run (0: the default for the build)")
	first   = flag.Int64("first", 0, "the first seed to run")
	oneSeed = flag.Int64("seed", -1, "run only this seed, printing its history")
)

func TestSimulation(t *testing.T) {
	if *oneSeed >= 0 {
		h, err := simulate(t, *oneSeed, true)
		t.Logf("seed %d history:\n%s", *oneSeed, h)
		if err != nil {
			t.Fatalf("seed %d: %v", *oneSeed, err)
		}
		return
	}
	n := *seeds
	if n == 0 {
		if raceDetector {
			t.Skip("the race detector's runtime does not last a simulation run (race_on_test.go); .ci/run runs it without")
		}
		n = defaultSeeds
	}
	lost := 0
	var slowest, slowestBound time.Duration
	for seed := *first; seed < *first+int64(n); seed++ {
		h, err := simulate(t, seed, false)
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay: go test ./internal/sim -run TestSimulation -seed %d\n%s", seed, err, seed, h)
		}
		lost += h.lost
		if h.ended > slowest {
			slowest, slowestBound = h.ended, h.bound
		}
	}
	t.Logf("%d seeds; record revisions that crashes lost after they were stored: %d; the slowest end after the faults stopped: %v (%.1f AckWaits; its bound %v)",
		n, lost, slowest, float64(slowest)/float64(ackWait), slowestBound)
}

// defaultSeeds is how many seeds TestSimulation runs by default.
const defaultSeeds = 20

// simulate runs one seed's history in a bubble and checks it.
func simulate(t *testing.T, seed int64, verbose bool) (h *history, err error) {
	synctest.Test(t, func(t *testing.T) {
		h, err = simulateIn(t, seed, verbose)
	})
	// nats.go keeps timers in a sync.Pool; one made in this bubble and taken from
	// the pool in the next would be used outside its bubble, which Go refuses. Two
	// collections empty every pool.
	runtime.GC()
	runtime.GC()
	return h, err
}

func simulateIn(t *testing.T, seed int64, verbose bool) (*history, error) {
	stopClock := make(chan struct{})
	defer close(stopClock)
	tickAccessTime(stopClock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &world{seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), hist: newHistory(), ctx: ctx, verbose: verbose,
		removed: map[string]bool{}}
	eng, err := startEngine(t.TempDir())
	if err != nil {
		return w.hist, err
	}
	w.eng = eng
	defer eng.stop()
	w.names, _ = queue.NamesFor(queueName)

	adminCl := eng.newClient("admin")
	adminCl.privileged = true
	adminNC, err := adminCl.connect()
	if err != nil {
		return w.hist, err
	}
	defer adminNC.Close()
	w.admin, _ = jetstream.New(adminNC)
	prodCl := eng.newClient("producer")
	prodNC, err := prodCl.connect()
	if err != nil {
		return w.hist, err
	}
	defer prodNC.Close()
	prodJS, _ := jetstream.New(prodNC)
	p, err := producer.New(ctx, prodJS, queueName, producer.DuplicateWindow(window))
	if err != nil {
		return w.hist, fmt.Errorf("producer: %w", err)
	}
	kv, err := w.admin.KeyValue(ctx, w.names.Bucket)
	if err != nil {
		return w.hist, err
	}
	if err := w.hist.watch(ctx, adminNC, w.admin, w.names.Bucket); err != nil {
		return w.hist, err
	}
	eng.restarted = func() { w.hist.restarted(w.awaitAdmin(adminNC)) }
	w.planJobs()
	for range 2 + w.intn(2) {
		if _, err := w.startWorker(); err != nil {
			return w.hist, fmt.Errorf("worker: %w", err)
		}
	}
	w.produce(p)
	w.faults(prodCl)
	w.hist.note("faults stop")
	bound := w.liveBound()
	ended := w.awaitEnd(kv, bound)
	w.hist.ended, w.hist.bound = ended, bound
	w.hist.note("the jobs ended %v after the faults stopped (bound %v)", ended, bound)
	if ended > bound {
		w.leftovers(kv)
	}
	// Stop every process before checking, so no run is still under way.
	cancel()
	for _, pr := range w.workers {
		pr.stop()
		<-pr.done
		pr.nc.Close()
	}
	w.wg.Wait()
	synctest.Wait() // the revisions stored by now reach the history
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	s, err := w.admin.Stream(rctx, "KV_"+w.names.Bucket)
	if err != nil {
		return w.hist, err
	}
	w.hist.complete(s.CachedInfo().State.LastSeq)
	if err := w.check(ended, bound); err != nil {
		return w.hist, err
	}
	return w.hist, nil
}

// liveBound is how long after the faults stop every job must have ended: the
// longest chain of runs one job, one sequence's jobs or one workflow's tasks still
// need, each run its work
// and a retry's backoff, plus a lease of a run the faults left holding it and the
// time a put-back copy waits, per job of the chain.
func (w *world) liveBound() time.Duration {
	chains := map[string]time.Duration{}
	for _, j := range w.jobs {
		key := j.id // the jobs of a sequence, or of a workflow, run one after another
		if j.sequence != "" {
			key = "sequence " + j.sequence
		} else if j.workflow != "" {
			key = "workflow " + j.workflow
		}
		runs := time.Duration(min(j.fails, maxAttempts-1) + 1)
		chains[key] += runs*(j.work+backoff) + ackWait + 2*time.Second
		if j.again > 0 {
			chains[key] += j.work + ackWait + 2*time.Second + j.again
		}
	}
	var most time.Duration
	for _, d := range chains {
		most = max(most, d)
	}
	return most + ackWait
}

// awaitEnd waits, at most bound, until every planned job's record is terminal and
// the jobs stream is empty, and returns how long that took (bound+1 if never).
func (w *world) awaitEnd(kv jetstream.KeyValue, bound time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) <= bound {
		if w.allEnded(kv) {
			return time.Since(start)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return bound + time.Nanosecond
}

func (w *world) allEnded(kv jetstream.KeyValue) bool {
	ctx, cancel := context.WithTimeout(w.ctx, 2*time.Second)
	defer cancel()
	for _, j := range w.jobs {
		if w.mayNotEnd(j) {
			continue
		}
		e, err := kv.Get(ctx, wireid.Encode(j.id))
		if err != nil {
			return false
		}
		r, err := record.Decode(j.id, e.Value(), e.Revision())
		if err != nil || !r.State.Terminal() {
			return false
		}
	}
	s, err := w.admin.Stream(ctx, w.names.Stream)
	if err != nil {
		return false
	}
	st := s.CachedInfo().State
	for seq := st.FirstSeq; st.Msgs > 0 && seq <= st.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil || !w.mayNotEnd(w.plan(w.names.JobID(m.Subject, m.Header.Get(queue.HeaderID), seq))) {
			return false
		}
	}
	return true
}

// awaitAdmin waits, after a restart, until the simulation's connection is back with
// its subscription, and returns the records stream's last sequence.
func (w *world) awaitAdmin(nc *nats.Conn) uint64 {
	for {
		if nc.IsConnected() && nc.FlushTimeout(time.Second) == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			s, err := w.admin.Stream(ctx, "KV_"+w.names.Bucket)
			cancel()
			if err == nil {
				return s.CachedInfo().State.LastSeq
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}
