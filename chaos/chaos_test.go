//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/producer"
)

// scale sizes a run: short by default (CI), full with WORKQ_CHAOS=full.
type scale struct {
	name          string
	jobs          int           // single-node run; 60% up front, the rest trickled in during the chaos
	workers, conc int           // workq work processes, --concurrency each
	sleep         string        // seconds an ordinary job's command sleeps
	ackWait       time.Duration // --ack-wait
	killEvery     time.Duration // one worker SIGKILLed and replaced this often
	stalls        []float64     // SIGSTOP a worker past AckWait when this share of jobs is finished
	serverKills   []float64     // SIGKILL and restart nats-server at these shares
	clusterJobs   int
	leaderKills   []float64 // SIGKILL a stream leader at these shares: jobs stream, then records stream, …
	budget        time.Duration
}

func sizes() scale {
	if os.Getenv("WORKQ_CHAOS") == "full" {
		return scale{name: "full", jobs: 4000, workers: 4, conc: 4, sleep: "0.05", ackWait: 2 * time.Second, killEvery: 2 * time.Second,
			stalls: []float64{0.1, 0.45, 0.8}, serverKills: []float64{0.3, 0.65}, clusterJobs: 2000, leaderKills: []float64{0.25, 0.6}, budget: 8 * time.Minute}
	}
	return scale{name: "short", jobs: 800, workers: 3, conc: 3, sleep: "0.05", ackWait: 2 * time.Second, killEvery: 2 * time.Second,
		stalls: []float64{0.15}, serverKills: []float64{0.45}, clusterJobs: 1500, leaderKills: []float64{0.2, 0.5}, budget: 3 * time.Minute}
}

// payloadOf gives job i its behaviour (see jobScript).
func payloadOf(i int) string {
	switch {
	case i%250 == 11:
		return "poison"
	case i%100 == 7:
		return "flaky"
	case i%40 == 3:
		return "slow"
	}
	return "ok"
}

func jobID(prefix string, i int) string { return fmt.Sprintf("%s-%05d", prefix, i) }

// enqueue enqueues jobs[from:to] in batches and retries what is not confirmed (same ids:
// the duplicate window makes that safe) until ctx ends. It records each confirmed job.
func enqueue(ctx context.Context, p *producer.Producer, ids []string, payload map[string]string, batch int, pace time.Duration, confirmed func(string)) error {
	for start := 0; start < len(ids); start += batch {
		todo := ids[start:min(start+batch, len(ids))]
		for len(todo) > 0 {
			jobs := make([]producer.Job, len(todo))
			for i, id := range todo {
				jobs[i] = producer.Job{ID: id, Payload: []byte(payload[id])}
			}
			bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			res, _ := p.EnqueueBatch(bctx, jobs)
			cancel()
			var again []string
			for i, r := range res {
				if r.Err == nil {
					confirmed(todo[i])
				} else {
					again = append(again, todo[i])
				}
			}
			todo = again
			if ctx.Err() != nil {
				return fmt.Errorf("%d jobs never confirmed: %w", len(todo), ctx.Err())
			}
			if len(todo) > 0 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if pace > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(pace):
			}
		}
	}
	return nil
}

// TestChaosSingleNode: a nats-server process with sync always, workq work processes
// SIGKILLed and replaced, one SIGSTOPped past AckWait, the server SIGKILLed and restarted.
func TestChaosSingleNode(t *testing.T) {
	sc := sizes()
	begin := time.Now()
	dir := workDir(t)
	q := "chaos"
	nodes := newNodes(t, dir, 1)
	srv := nodes[0]
	srv.start(t)
	nc, js := connect(t, srv.url())
	waitJetStream(t, js, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), sc.budget)
	defer cancel()
	p, err := producer.New(ctx, js, q, producer.GroupCommit(true))
	if err != nil {
		t.Fatal(err)
	}
	o := observe(t, srv.url(), js, q)

	ids := make([]string, sc.jobs)
	payload := map[string]string{}
	for i := range ids {
		ids[i] = jobID("j", i)
		payload[ids[i]] = payloadOf(i)
	}
	var cmu sync.Mutex
	confirmed := map[string]string{}
	confirm := func(id string) { cmu.Lock(); confirmed[id] = payload[id]; cmu.Unlock() }
	upFront := sc.jobs * 6 / 10
	if err := enqueue(ctx, p, ids[:upFront], payload, 500, 0, confirm); err != nil {
		t.Fatal(err)
	}

	wp := &workerPool{t: t, dir: dir, queue: q, url: srv.url(), ackWait: sc.ackWait, concurrency: sc.conc, sleep: sc.sleep}
	wp.start(sc.workers)
	chaosStart := time.Now()
	t.Logf("%s run: %d jobs (%d up front), %d workers × %d, AckWait %s; servers and workers up in %s",
		sc.name, sc.jobs, upFront, sc.workers, sc.conc, sc.ackWait, chaosStart.Sub(begin).Round(time.Millisecond))

	// The rest trickles in while the chaos runs, through the server's crash: a producer
	// retries what was not confirmed, with the same ids.
	prodDone := make(chan error, 1)
	pnc, pjs := connect(t, srv.url())
	go func() {
		defer pnc.Close()
		pp, err := producer.New(ctx, pjs, q, producer.GroupCommit(true))
		if err != nil {
			prodDone <- err
			return
		}
		prodDone <- enqueue(ctx, pp, ids[upFront:], payload, 20, 100*time.Millisecond, confirm)
	}()

	var windows []window
	kills, stalls, serverKills := 0, 0, 0
	nextKill := time.Now().Add(sc.killEvery)
	killSlot := 1 // slot 0 is the one that stalls
	var stalled *worker
	var stalledAt time.Time
	producerDone := false
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if !producerDone {
			select {
			case err := <-prodDone:
				if err != nil {
					t.Fatalf("producer: %v", err)
				}
				producerDone = true
			default:
			}
		}
		done := o.finishedJobs(nc, js)
		if producerDone && done >= sc.jobs {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after %s: %d of %d jobs finished (%d confirmed); kills %d, stalls %d, server kills %d; logs in %s",
				sc.budget, done, sc.jobs, len(confirmed), kills, stalls, serverKills, dir)
		}
		share := float64(done) / float64(sc.jobs)
		now := time.Now()
		switch {
		case stalled != nil && now.Sub(stalledAt) > sc.ackWait*5/2:
			if err := stalled.p.signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			t.Logf("%6.2fs SIGCONT %s after %s frozen", now.Sub(chaosStart).Seconds(), stalled.name, now.Sub(stalledAt).Round(time.Millisecond))
			stalled = nil
		case stalled == nil && stalls < len(sc.stalls) && share >= sc.stalls[stalls]:
			stalled, stalledAt = wp.slots[0], now
			if err := stalled.p.signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stalls++
			t.Logf("%6.2fs SIGSTOP %s (%d/%d jobs finished)", now.Sub(chaosStart).Seconds(), stalled.name, done, sc.jobs)
		case serverKills < len(sc.serverKills) && share >= sc.serverKills[serverKills]:
			serverKills++
			srv.crash(t)
			killedAt := time.Now()
			t.Logf("%6.2fs SIGKILL nats-server (%d/%d jobs finished)", killedAt.Sub(chaosStart).Seconds(), done, sc.jobs)
			srv.start(t)
			waitJetStream(t, js, 60*time.Second)
			var heard time.Time
			waitUntil(t, 30*time.Second, "the observer to reconnect", func() bool {
				var ok bool
				heard, ok = o.reconnectedSince(killedAt)
				return ok
			})
			windows = append(windows, window{what: fmt.Sprintf("nats-server kill %d", serverKills), from: killedAt, to: heard})
			t.Logf("%6.2fs nats-server back (restarted on its store in %s)", time.Since(chaosStart).Seconds(), time.Since(killedAt).Round(time.Millisecond))
		case now.After(nextKill):
			old, nw := wp.replace(killSlot)
			kills++
			t.Logf("%6.2fs SIGKILL %s, started %s (%d/%d jobs finished)", time.Since(chaosStart).Seconds(), old.name, nw.name, done, sc.jobs)
			killSlot = 1 + killSlot%(sc.workers-1)
			nextKill = time.Now().Add(sc.killEvery)
		}
		<-tick.C
	}
	processing := time.Since(chaosStart)
	if stalled != nil {
		_ = stalled.p.signal(syscall.SIGCONT)
	}
	waitJobsAcked(t, js, q, 10*sc.ackWait)
	wp.stopAll(30 * time.Second)

	f := check(t, q, nc, js, o, wp, confirmed, windows)
	t.Logf("%s single-node run: %d worker kills, %d stalls, %d server kills; processing %s, total %s\n%s",
		sc.name, kills, stalls, serverKills, processing.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond), f)
}

// TestChaosCluster: a 3-node cluster of nats-server processes, an R3 queue, the stream
// leader SIGKILLed and restarted while workers run.
func TestChaosCluster(t *testing.T) {
	sc := sizes()
	begin := time.Now()
	dir := workDir(t)
	q := "chaosr3"
	nodes := newNodes(t, dir, 3)
	for _, n := range nodes {
		n.start(t)
	}
	url := urls(nodes)
	nc, js := connect(t, url)
	waitJetStream(t, js, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), sc.budget)
	defer cancel()
	var p *producer.Producer
	waitUntil(t, 60*time.Second, "the R3 queue to be created", func() bool {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var err error
		p, err = producer.New(pctx, js, q, producer.Replicas(3))
		return err == nil
	})
	o := observe(t, url, js, q)

	payload := map[string]string{}
	ids := make([]string, sc.clusterJobs)
	for i := range ids {
		ids[i] = jobID("c", i)
		payload[ids[i]] = payloadOf(i)
	}
	confirmed := map[string]string{}
	if err := enqueue(ctx, p, ids, payload, 500, 0, func(id string) { confirmed[id] = payload[id] }); err != nil {
		t.Fatal(err)
	}
	wp := &workerPool{t: t, dir: dir, queue: q, url: url, ackWait: sc.ackWait, concurrency: sc.conc, sleep: sc.sleep}
	wp.start(sc.workers)
	chaosStart := time.Now()
	t.Logf("%s cluster run: %d jobs on an R3 queue, %d workers × %d; cluster up in %s", sc.name, sc.clusterJobs, sc.workers, sc.conc, chaosStart.Sub(begin).Round(time.Millisecond))

	streams := []string{"WORKQ_" + q, "KV_WORKQ_" + q + "_JOBS"}
	var windows []window
	kills := 0
	for {
		done := o.finishedJobs(nc, js)
		if done >= sc.clusterJobs {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after %s: %d of %d jobs finished; logs in %s", sc.budget, done, sc.clusterJobs, dir)
		}
		if kills < len(sc.leaderKills) && float64(done)/float64(sc.clusterJobs) >= sc.leaderKills[kills] {
			stream := streams[kills%len(streams)]
			kills++
			leader := streamLeader(t, js, stream, "")
			var node *natsNode
			for _, n := range nodes {
				if n.name == leader {
					node = n
				}
			}
			if node == nil {
				t.Fatalf("stream %s: leader %q is none of the nodes", stream, leader)
			}
			also := ""
			for _, s := range streams {
				if s != stream && streamLeader(t, js, s, "") == leader {
					also += " and " + s
				}
			}
			node.crash(t)
			killedAt := time.Now()
			t.Logf("%6.2fs SIGKILL %s, leader of %s%s (%d/%d jobs finished)", killedAt.Sub(chaosStart).Seconds(), leader, stream, also, done, sc.clusterJobs)
			newLeader := streamLeader(t, js, stream, leader)
			elected := time.Now()
			t.Logf("%6.2fs %s has a new leader, %s, %s after the kill", elected.Sub(chaosStart).Seconds(), stream, newLeader, elected.Sub(killedAt).Round(time.Millisecond))
			node.start(t)
			for _, s := range streams {
				waitCurrent(t, js, s, 60*time.Second)
			}
			to := time.Now()
			if r, ok := o.reconnectedSince(killedAt); ok && r.After(to) {
				to = r
			}
			windows = append(windows, window{what: fmt.Sprintf("leader kill %d (%s, leader of %s%s; new leader elected in %s)",
				kills, leader, stream, also, elected.Sub(killedAt).Round(time.Millisecond)), from: killedAt, to: to})
			t.Logf("%6.2fs %s restarted and every replica current", time.Since(chaosStart).Seconds(), leader)
			continue
		}
		time.Sleep(50 * time.Millisecond)
	}
	processing := time.Since(chaosStart)
	waitJobsAcked(t, js, q, 10*sc.ackWait)
	wp.stopAll(30 * time.Second)
	f := check(t, q, nc, js, o, wp, confirmed, windows)
	f.pauses = pausesAround(o, windows)
	t.Logf("%s cluster run: %d leader kills of %d planned; processing %s, total %s\n%s", sc.name, kills, len(sc.leaderKills), processing.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond), f)
}

// workDir is the run's directory: server stores and logs, workers' logs and run logs.
// It is removed when the test passes and kept (and named) when it fails, or always
// with WORKQ_CHAOS_KEEP=1.
func workDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "workq-"+t.Name()+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("WORKQ_CHAOS_KEEP") == "1" {
			t.Logf("server stores, workq logs and run logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// streamLeader waits until stream has a leader other than not and returns its name.
func streamLeader(t *testing.T, js jetstream.JetStream, stream, not string) string {
	t.Helper()
	var leader string
	waitUntil(t, 60*time.Second, "a leader for "+stream, func() bool {
		// A short timeout: the election's measured length is no coarser than this.
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil || s.CachedInfo().Cluster == nil {
			return false
		}
		leader = s.CachedInfo().Cluster.Leader
		return leader != "" && leader != not
	})
	return leader
}

// waitCurrent waits until every replica of stream is current.
func waitCurrent(t *testing.T, js jetstream.JetStream, stream string, d time.Duration) {
	t.Helper()
	waitUntil(t, d, "every replica of "+stream+" to be current", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil || s.CachedInfo().Cluster == nil || s.CachedInfo().Cluster.Leader == "" {
			return false
		}
		rs := s.CachedInfo().Cluster.Replicas
		if len(rs) != 2 {
			return false
		}
		for _, r := range rs {
			if !r.Current || r.Offline {
				return false
			}
		}
		return true
	})
}
