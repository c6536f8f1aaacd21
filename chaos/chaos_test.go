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

	// The workflow runs (workflow_test.go): a workflow of flowLayers layers of
	// flowWidth tasks and a last task, run by flowWorkers processes × flowConc.
	flowLayers, flowWidth int
	flowWorkers, flowConc int
	flowServerKills       []float64 // single node: SIGKILL and restart nats-server at these shares of tasks done
	flowLeaderKills       []float64 // cluster: SIGKILL a stream leader at these shares (as leaderKills)
	flowBudget            time.Duration
}

func sizes() scale {
	if os.Getenv("WORKQ_CHAOS") == "full" {
		return scale{name: "full", jobs: 4000, workers: 4, conc: 4, sleep: "0.05", ackWait: 2 * time.Second, killEvery: 2 * time.Second,
			stalls: []float64{0.1, 0.45, 0.8}, serverKills: []float64{0.3, 0.65}, clusterJobs: 2000, leaderKills: []float64{0.25, 0.6}, budget: 8 * time.Minute,
			flowLayers: 40, flowWidth: 50, flowWorkers: 4, flowConc: 8, flowServerKills: []float64{0.5}, flowLeaderKills: []float64{0.3, 0.65}, flowBudget: 6 * time.Minute}
	}
	return scale{name: "short", jobs: 800, workers: 3, conc: 3, sleep: "0.05", ackWait: 2 * time.Second, killEvery: 2 * time.Second,
		stalls: []float64{0.15}, serverKills: []float64{0.45}, clusterJobs: 1500, leaderKills: []float64{0.2, 0.5}, budget: 3 * time.Minute,
		flowLayers: 15, flowWidth: 20, flowWorkers: 3, flowConc: 4, flowServerKills: []float64{0.5}, flowLeaderKills: []float64{0.4}, flowBudget: 2 * time.Minute}
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
func TestChaosSingleNode(t *testing.T) { chaosSingleNode(t, "single-node", nil) }

// chaosSingleNode runs TestChaosSingleNode's chaos, its workers launched from binary
// (nil: this module's workq; see workerPool.binary).
func chaosSingleNode(t *testing.T, what string, binary func(slot, gen int) string) {
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

	wp := &workerPool{t: t, dir: dir, queue: q, url: srv.url(), ackWait: sc.ackWait, concurrency: sc.conc, sleep: sc.sleep, binary: binary}
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
			windows = append(windows, restartServer(t, srv, js, o, fmt.Sprintf("nats-server kill %d", serverKills), chaosStart,
				fmt.Sprintf("%d/%d jobs finished", done, sc.jobs)))
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
	t.Logf("%s %s run: %d worker kills, %d stalls, %d server kills; processing %s, total %s\n%s",
		sc.name, what, kills, stalls, serverKills, processing.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond), f)
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
			kills++
			windows = append(windows, killLeader(t, js, nodes, streams, kills, o, chaosStart, fmt.Sprintf("%d/%d jobs finished", done, sc.clusterJobs)))
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

// restartServer SIGKILLs the single server srv, restarts it on its store and waits
// until JetStream answers and the observer has reconnected. It returns the window in
// which the observer may have missed revisions, named what. The log lines say when
// (seconds since start) and what had happened by then (progress).
func restartServer(t *testing.T, srv *natsNode, js jetstream.JetStream, o *observer, what string, start time.Time, progress string) window {
	t.Helper()
	srv.crash(t)
	killedAt := time.Now()
	t.Logf("%6.2fs SIGKILL nats-server at %s (%s)", killedAt.Sub(start).Seconds(), killedAt.Format("15:04:05.000"), progress)
	srv.start(t)
	waitJetStream(t, js, 60*time.Second)
	var heard time.Time
	waitUntil(t, 30*time.Second, "the observer to reconnect", func() bool {
		var ok bool
		heard, ok = o.reconnectedSince(killedAt)
		return ok
	})
	t.Logf("%6.2fs nats-server back (restarted on its store in %s)", time.Since(start).Seconds(), time.Since(killedAt).Round(time.Millisecond))
	return window{what: what, from: killedAt, to: heard}
}

// killLeader makes the kill-th leader kill of a cluster run and waits until the
// cluster is whole again (see leaderKill). It returns the window from the kill until
// then (or until the observer reconnected, if later). The log lines say when
// (seconds since start) and what had happened by then (progress).
func killLeader(t *testing.T, js jetstream.JetStream, nodes []*natsNode, streams []string, kill int, o *observer, start time.Time, progress string) window {
	t.Helper()
	k := startLeaderKill(t, js, nodes, streams, kill, start, progress)
	for {
		if w, ok := k.step(t, js, o); ok {
			return w
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leaderKill is the kill-th leader kill of a cluster run, followed step by step so
// that a run can go on with its other faults meanwhile: the node that leads
// streams[(kill-1) % len(streams)] is SIGKILLed; once another leader is elected the
// node is restarted; the kill ends when every replica of every stream of streams is
// current again.
type leaderKill struct {
	kill           int
	stream, leader string
	also           string // the other streams the node led
	node           *natsNode
	streams        []string
	start          time.Time // the run's start, for the log lines
	killedAt       time.Time
	elected        time.Time // zero until another leader is elected
	restarted      time.Time
}

// startLeaderKill SIGKILLs the leader (see leaderKill). The log line says when
// (seconds since start) and what had happened by then (progress).
func startLeaderKill(t *testing.T, js jetstream.JetStream, nodes []*natsNode, streams []string, kill int, start time.Time, progress string) *leaderKill {
	t.Helper()
	k := &leaderKill{kill: kill, stream: streams[(kill-1)%len(streams)], streams: streams, start: start}
	k.leader = streamLeader(t, js, k.stream, "")
	for _, n := range nodes {
		if n.name == k.leader {
			k.node = n
		}
	}
	if k.node == nil {
		t.Fatalf("stream %s: leader %q is none of the nodes", k.stream, k.leader)
	}
	for _, s := range streams {
		if s != k.stream && streamLeader(t, js, s, "") == k.leader {
			k.also += " and " + s
		}
	}
	k.node.crash(t)
	k.killedAt = time.Now()
	t.Logf("%6.2fs SIGKILL %s, leader of %s%s (%s)", k.killedAt.Sub(start).Seconds(), k.leader, k.stream, k.also, progress)
	return k
}

// step takes the kill a step further, without waiting: it restarts the node once
// another leader is elected, and returns the kill's window once every replica is
// current, from the kill until then (or until the observer reconnected, if later).
// Each stage fails the test after 60s.
func (k *leaderKill) step(t *testing.T, js jetstream.JetStream, o *observer) (window, bool) {
	t.Helper()
	if k.elected.IsZero() {
		l, ok := leaderOf(js, k.stream)
		if !ok || l == k.leader {
			if time.Since(k.killedAt) > 60*time.Second {
				t.Fatalf("timed out after 60s waiting for a leader for %s", k.stream)
			}
			return window{}, false
		}
		k.elected = time.Now()
		t.Logf("%6.2fs %s has a new leader, %s, %s after the kill", k.elected.Sub(k.start).Seconds(), k.stream, l, k.elected.Sub(k.killedAt).Round(time.Millisecond))
		k.node.start(t)
		k.restarted = time.Now()
	}
	for _, s := range k.streams {
		if !current(js, s) {
			if time.Since(k.restarted) > 60*time.Second {
				t.Fatalf("timed out after 60s waiting for every replica of %s to be current", s)
			}
			return window{}, false
		}
	}
	to := time.Now()
	if r, ok := o.reconnectedSince(k.killedAt); ok && r.After(to) {
		to = r
	}
	t.Logf("%6.2fs %s restarted and every replica current", time.Since(k.start).Seconds(), k.leader)
	return window{what: fmt.Sprintf("leader kill %d (%s, leader of %s%s; new leader elected in %s)",
		k.kill, k.leader, k.stream, k.also, k.elected.Sub(k.killedAt).Round(time.Millisecond)), from: k.killedAt, to: to}, true
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
		var ok bool
		leader, ok = leaderOf(js, stream)
		return ok && leader != not
	})
	return leader
}

// leaderOf asks once for the name of stream's leader; false when it has none, or
// did not answer.
func leaderOf(js jetstream.JetStream, stream string) (string, bool) {
	// A short timeout: the election's measured length is no coarser than this.
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil || s.CachedInfo().Cluster == nil || s.CachedInfo().Cluster.Leader == "" {
		return "", false
	}
	return s.CachedInfo().Cluster.Leader, true
}

// current asks once whether stream has a leader and both its other replicas are
// current.
func current(js jetstream.JetStream, stream string) bool {
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
}
