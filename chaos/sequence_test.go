//go:build chaos

package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/workflow"
	"github.com/workq/workq/producer"
)

// Sequences (producer.Sequence) under the same chaos as the workflow runs: jobs of
// many keys are enqueued, each key's in order (job i once job i-1 is confirmed; keys
// interleave, from several goroutines), half with Enqueue and half in batches
// (EnqueueBatch: a few keys' next jobs, interleaved, the batch's order being each
// key's order), the first few of each key before the workers start, the rest while
// they run. Worker processes (this test binary as a
// Go worker: workerproc_test.go) are SIGKILLed and replaced every couple of
// seconds, while the single server is SIGKILLed and restarted on its store once,
// or a 3-node cluster loses a stream leader (the records bucket's first: it holds
// the sequences' links and takes their tellings). Each job's handler logs its run
// and commits "<id> <fencing token>".
//
// From the complete history of the records and the workers' run logs the check
// asserts, per key and job: the job's record names its key, and as the job it
// waits for (after) the key's job before it, or none only if that one had ended
// before it was created (and the first job of a key none); it was created waiting
// for that job (else never waiting), left waiting once, after that job's done write,
// and was never claimed while waiting; it ended once, done, with a result naming a
// run of it that started; every claim of it (running writes: fencing tokens and
// record revisions are one sequence, the records stream's) and every run the workers
// logged came after the done write of the job before it (by revision, and by the
// clock for a run's start), and none after its own done write. The queue ends empty.

// seqScale sizes the sequence runs: short by default (CI), full with
// WORKQ_CHAOS=full. The rest (AckWait, the kill period) is sizes()'s. The short
// runs together add about 30 s to CI, most of it the server's restart and the
// leader's election, and the last jobs of keys that a worker's kill held up for
// AckWait.
type seqScale struct {
	keys, perKey  int // keys, jobs per key
	workers, conc int // Go worker processes, concurrency each
	producers     int // goroutines enqueueing, each a share of the keys
	upFront       int // rounds (one job of every key) enqueued before the workers start
	lead          int // rounds the enqueue may then be ahead of the jobs ended
	serverKills   []float64
	leaderKills   []float64
	budget        time.Duration
}

func seqSizes() seqScale {
	if os.Getenv("WORKQ_CHAOS") == "full" {
		return seqScale{keys: 500, perKey: 40, workers: 4, conc: 8, producers: 32, upFront: 10, lead: 4,
			serverKills: []float64{0.5}, leaderKills: []float64{0.3, 0.65}, budget: 10 * time.Minute}
	}
	return seqScale{keys: 40, perKey: 10, workers: 3, conc: 4, producers: 10, upFront: 4, lead: 3,
		serverKills: []float64{0.5}, leaderKills: []float64{0.4}, budget: 2 * time.Minute}
}

// The worker processes of these runs run seqHandler (goHandlers, workerproc_test.go).
func init() { goHandlers["sequence"] = seqHandler }

// seqPlan is what a run enqueues: jobs[k][i] is the i-th job of keys[k].
type seqPlan struct {
	keys []string
	jobs [][]string
}

// newSeqPlan names the keys and jobs: half the keys are any text (spaces, '@', a
// non-ASCII letter: their links' bucket keys are encoded), half plain tokens.
func newSeqPlan(keys, perKey int) seqPlan {
	var p seqPlan
	for k := range keys {
		key := fmt.Sprintf("k%03d", k)
		if k%2 == 1 {
			key = fmt.Sprintf("customer %03d@exämple.com", k)
		}
		p.keys = append(p.keys, key)
		ids := make([]string, perKey)
		for i := range ids {
			ids[i] = fmt.Sprintf("s%03d-%03d", k, i)
		}
		p.jobs = append(p.jobs, ids)
	}
	return p
}

func (p seqPlan) size() int { return len(p.keys) * len(p.jobs[0]) }

// seqSleep is how long job id's handler works: 2 to 6 ms, 150 ms for one job in 16
// (so that the kills catch runs in the middle).
func seqSleep(id string) time.Duration {
	h := fnv.New32a()
	h.Write([]byte(id))
	s := h.Sum32()
	if s%16 == 0 {
		return 150 * time.Millisecond
	}
	return time.Duration(2+s%5) * time.Millisecond
}

// seqHandler runs a sequence's job in a worker process: it logs the run, works a few
// ms and commits "<id> <token>".
func seqHandler(runLog *os.File, worker string) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		start := time.Now()
		token, err := j.FencingToken(ctx)
		if err != nil {
			return err
		}
		if err := logRun(runLog, j, worker, token, start); err != nil {
			return err
		}
		select {
		case <-time.After(seqSleep(j.ID())):
		case <-ctx.Done():
			return ctx.Err()
		}
		j.SetResult(fmt.Appendf(nil, "%s %d", j.ID(), token))
		return nil
	})
}

func TestChaosSequenceSingleNode(t *testing.T) { chaosSequence(t, 1) }

func TestChaosSequenceCluster(t *testing.T) { chaosSequence(t, 3) }

// enqueueStats are what the enqueueing goroutines met.
type enqueueStats struct {
	retries, duplicates atomic.Int64
	single              atomic.Int64 // jobs first enqueued with Enqueue
	logged              atomic.Int64 // batches not wholly confirmed, logged (the first ten)

	mu      sync.Mutex
	batches []seqBatch // every EnqueueBatch, in no particular order
}

// seqBatch is one EnqueueBatch of a run: its jobs in the batch's order and what its
// results said.
type seqBatch struct {
	ids                 []string
	keys                int
	failed              int      // results with Err: those jobs were enqueued again, with Enqueue
	duplicates, waiting int      // results answered Duplicate, Waiting
	afterFailed         []string // jobs confirmed after a job of their key failed before them in the batch
}

// batched is how many jobs were first enqueued in batches.
func (st *enqueueStats) batched() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := 0
	for _, b := range st.batches {
		n += len(b.ids)
	}
	return n
}

// seqEnqueuer enqueues a run's sequences (enqueueSequences).
type seqEnqueuer struct {
	p     *producer.Producer
	plan  seqPlan
	lead  int
	ended func() int
	st    *enqueueStats
	logf  func(string, ...any)
}

// enqueueSequences enqueues rounds from to to of plan's jobs from producers
// goroutines, each a share of the keys, round by round (job i of each of its keys,
// then job i+1), in blocks of 2 to 5 rounds (at most lead+1), taken in turn with
// Enqueue, a job at a time, and with EnqueueBatch: a batch holds a block's jobs of 2
// to 5 of the goroutine's keys (seqGroups), the keys' jobs interleaved at random,
// each key's in order. A job is only enqueued once the one before it of its key is
// confirmed (in a batch, the batch's order is the enqueue order); one not confirmed
// is enqueued again with its id, with Enqueue, until it is (the first ten retries are
// logged with logf), before any later job of its key is enqueued again or anew. A
// round starts (a batch: its last round) once the jobs ended (ended()) are within
// lead rounds of it. The blocks' sizes, the batches' keys and their interleaving come
// from seed.
func enqueueSequences(ctx context.Context, p *producer.Producer, plan seqPlan, seed uint64, from, to, producers, lead int, ended func() int, st *enqueueStats, logf func(string, ...any)) error {
	e := &seqEnqueuer{p: p, plan: plan, lead: lead, ended: ended, st: st, logf: logf}
	errs := make(chan error, producers)
	for g := range producers {
		go func() {
			r := rand.New(rand.NewPCG(seed, uint64(from)<<32|uint64(g)))
			errs <- e.share(ctx, r, g, producers, from, to)
		}()
	}
	var err error
	for range producers {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	return err
}

// share enqueues rounds from to to of goroutine g's keys (every producers-th),
// block by block, with Enqueue and EnqueueBatch in turn (the even goroutines begin
// with a batch).
func (e *seqEnqueuer) share(ctx context.Context, r *rand.Rand, g, producers, from, to int) error {
	var ks []int
	for k := g; k < len(e.plan.keys); k += producers {
		ks = append(ks, k)
	}
	batched := g%2 == 0
	for i := from; i < to; {
		// At most lead+1 rounds, so that a batch's last round may start once every
		// round before the batch ended.
		m := min(to-i, 2+r.IntN(max(1, min(5, e.lead+1)-1)))
		if batched {
			if err := e.await(ctx, i+m-1); err != nil {
				return err
			}
			for _, group := range seqGroups(r, ks) {
				if err := e.batch(ctx, r, group, i, m); err != nil {
					return err
				}
			}
		} else {
			for j := i; j < i+m; j++ {
				if err := e.await(ctx, j); err != nil {
					return err
				}
				for _, k := range ks {
					e.st.single.Add(1)
					if err := e.one(ctx, k, j); err != nil {
						return err
					}
				}
			}
		}
		i += m
		batched = !batched
	}
	return nil
}

// seqGroups deals ks, shuffled, into groups of 2 to 4 keys, or 5 rather than leave
// one alone (one key alone only when there is one).
func seqGroups(r *rand.Rand, ks []int) [][]int {
	ks = slices.Clone(ks)
	r.Shuffle(len(ks), func(a, b int) { ks[a], ks[b] = ks[b], ks[a] })
	var groups [][]int
	for len(ks) > 0 {
		n := min(len(ks), 2+r.IntN(3))
		if len(ks)-n == 1 {
			n++ // no key left alone
		}
		groups = append(groups, ks[:n])
		ks = ks[n:]
	}
	return groups
}

// await returns once round i may start: the jobs ended are within lead rounds of it.
func (e *seqEnqueuer) await(ctx context.Context, i int) error {
	for e.ended() < (i-e.lead)*len(e.plan.keys) {
		if ctx.Err() != nil {
			return fmt.Errorf("round %d: %w", i, ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// one enqueues job i of key k with Enqueue, with its id, until it is confirmed.
func (e *seqEnqueuer) one(ctx context.Context, k, i int) error {
	id := e.plan.jobs[k][i]
	for {
		// Each try has 3 s: one whose request or reply a server's kill lost would
		// otherwise hold its key's later jobs back for as long as it waits.
		tried := time.Now()
		ectx, cancel := context.WithTimeout(ctx, 3*time.Second)
		info, err := e.p.Enqueue(ectx, []byte(id), producer.ID(id), producer.Sequence(e.plan.keys[k]))
		cancel()
		if err == nil {
			if info.Duplicate {
				e.st.duplicates.Add(1)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("job %s never confirmed: %w", id, err)
		}
		if n := e.st.retries.Add(1); n <= 10 {
			e.logf("enqueue of job %s retried after %s: %v", id, time.Since(tried).Round(time.Millisecond), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// batch enqueues jobs i to i+m-1 of keys ks with one EnqueueBatch, the keys' jobs
// interleaved at random, each key's in order; then the jobs it did not confirm again,
// with Enqueue, in the batch's order, each until it is confirmed.
func (e *seqEnqueuer) batch(ctx context.Context, r *rand.Rand, ks []int, i, m int) error {
	type slot struct{ k, i int }
	var slots []slot
	next := make([]int, len(ks)) // of each key, its next job in the block
	for range len(ks) * m {
		x := r.IntN(len(ks))
		for next[x] == m {
			x = (x + 1) % len(ks)
		}
		slots = append(slots, slot{ks[x], i + next[x]})
		next[x]++
	}
	if len(slots) == 1 { // a batch of one is no batch
		e.st.single.Add(1)
		return e.one(ctx, slots[0].k, slots[0].i)
	}
	b := seqBatch{keys: len(ks)}
	jobs := make([]producer.Job, len(slots))
	for x, s := range slots {
		id := e.plan.jobs[s.k][s.i]
		b.ids = append(b.ids, id)
		jobs[x] = producer.Job{Payload: []byte(id), ID: id, Sequence: e.plan.keys[s.k]}
	}
	// 5 s, more than a job's try: a refused batch enqueues its jobs one by one.
	tried := time.Now()
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	res, err := e.p.EnqueueBatch(bctx, jobs)
	cancel()
	if len(res) != len(jobs) {
		return fmt.Errorf("a batch of %d jobs answered %d results: %v", len(jobs), len(res), err)
	}
	failed := map[int]bool{} // the keys with a job not confirmed
	var again []slot
	var firstErr error
	for x, s := range slots {
		switch rs := res[x]; {
		case rs.ID != b.ids[x]:
			return fmt.Errorf("a batch's result %d is job %q, its job is %s", x, rs.ID, b.ids[x])
		case rs.Err != nil:
			b.failed++
			failed[s.k] = true
			again = append(again, s)
			if firstErr == nil {
				firstErr = rs.Err
			}
		default:
			if failed[s.k] {
				b.afterFailed = append(b.afterFailed, b.ids[x])
			}
			if rs.Duplicate {
				b.duplicates++
			}
			if rs.Waiting {
				b.waiting++
			}
		}
	}
	e.st.mu.Lock()
	e.st.batches = append(e.st.batches, b)
	e.st.mu.Unlock()
	if err == nil && b.failed > 0 {
		return fmt.Errorf("a batch answered no error, %d of its results failed (%v)", b.failed, firstErr)
	}
	if b.failed > 0 && e.st.logged.Add(1) <= 10 {
		e.logf("batch of %d jobs (%d keys, %s …) after %s: %d not confirmed (%v), enqueued again; confirmed after a failed job of their key: %v",
			len(jobs), len(ks), b.ids[0], time.Since(tried).Round(time.Millisecond), b.failed, firstErr, b.afterFailed)
	}
	for _, s := range again {
		if err := e.one(ctx, s.k, s.i); err != nil {
			return err
		}
	}
	return nil
}

// chaosSequence runs the sequences on one nats-server (SIGKILLed and restarted on
// its store) or a 3-node cluster with an R3 queue (stream leaders SIGKILLed), worker
// processes SIGKILLed and replaced all along.
func chaosSequence(t *testing.T, servers int) {
	sc, ss := sizes(), seqSizes()
	begin := time.Now()
	dir := workDir(t)
	q, where := "seq", "one nats-server"
	popts := []producer.Option{producer.GroupCommit(true)}
	if servers > 1 {
		q, where = "seqr3", fmt.Sprintf("a %d-node cluster, R3 queue", servers)
		popts = []producer.Option{producer.Replicas(servers)}
	}
	nodes := newNodes(t, dir, servers)
	for _, n := range nodes {
		n.start(t)
	}
	url := urls(nodes)
	nc, js := connect(t, url)
	waitJetStream(t, js, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), ss.budget)
	defer cancel()
	var p *producer.Producer
	waitUntil(t, 60*time.Second, "the queue to be created", func() bool {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var err error
		p, err = producer.New(pctx, js, q, popts...)
		return err == nil
	})
	o := observe(t, url, js, q)

	plan := newSeqPlan(ss.keys, ss.perKey)
	n := plan.size()
	seed := flowSeed(t)
	var est enqueueStats
	logf := func(format string, args ...any) { t.Logf(format, args...) }
	upFrontStart := time.Now()
	if err := enqueueSequences(ctx, p, plan, seed, 0, ss.upFront, ss.producers, ss.upFront, o.terminalJobs, &est, logf); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	upFrontTime := time.Since(upFrontStart)
	wp := &workerPool{t: t, dir: dir, queue: q, url: url, ackWait: sc.ackWait, concurrency: ss.conc, program: goWorker("sequence")}
	wp.start(ss.workers)
	chaosStart := time.Now()
	t.Logf("%s sequence run on %s: %d jobs over %d keys (%d each) enqueued by %d goroutines (with Enqueue and in batches in turn, seed %d), %d a key up front (in %s, %d in %d batches), the rest during the run, at most %d a key ahead of the jobs ended; %d worker processes × %d, AckWait %s; up in %s",
		sc.name, where, n, ss.keys, ss.perKey, ss.producers, seed, ss.upFront, upFrontTime.Round(time.Millisecond), est.batched(), len(est.batches), ss.lead, ss.workers, ss.conc, sc.ackWait,
		chaosStart.Sub(begin).Round(time.Millisecond))

	// The rest on a connection of its own, through the kills.
	enqueued := make(chan error, 1)
	_, pjs := connect(t, url)
	go func() {
		pp, err := producer.New(ctx, pjs, q, popts...)
		if err != nil {
			enqueued <- err
			return
		}
		enqueued <- enqueueSequences(ctx, pp, plan, seed, ss.upFront, ss.perKey, ss.producers, ss.lead, o.terminalJobs, &est, func(format string, args ...any) {
			logf("%6.2fs "+format, append([]any{time.Since(chaosStart).Seconds()}, args...)...)
		})
	}()

	// The records bucket first: it holds the links and takes the tellings.
	streams := []string{"KV_WORKQ_" + q + "_JOBS", "WORKQ_" + q}
	fs := newFaults(t, js, o, wp, nodes, streams, chaosStart, ss.serverKills, ss.leaderKills, ss.workers, sc.killEvery)
	var enqueueTime time.Duration
	enqueueDone := false
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if !enqueueDone {
			select {
			case err := <-enqueued:
				if err != nil {
					t.Fatalf("enqueue: %v", err)
				}
				enqueueDone, enqueueTime = true, time.Since(chaosStart)
				t.Logf("%6.2fs every job enqueued (%d in batches, %d with Enqueue; %d enqueues retried, %d answered duplicate)", enqueueTime.Seconds(), est.batched(), est.single.Load(), est.retries.Load(), est.duplicates.Load())
			default:
			}
		}
		// While a leader kill is under way, what was heard: reading back what was not
		// waits for the stream's leader.
		done := o.terminalJobs()
		if !fs.leaderKilling() {
			done = o.finishedJobs(nc, js)
		}
		if enqueueDone && done >= n {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after %s: %d of %d jobs ended; %d worker kills, %d server kills, %d leader kills; logs in %s\n%s",
				ss.budget, done, n, fs.kills, fs.serverKill, fs.leaderKill, dir, seqUnfinished(o, plan))
		}
		fs.step(float64(done)/float64(n), fmt.Sprintf("%d/%d jobs ended", done, n))
		<-tick.C
	}
	processing := time.Since(chaosStart)
	windows := fs.finish() // every job ended before the cluster was whole again
	waitJobsAcked(t, js, q, 10*sc.ackWait)
	wp.stopAll(30 * time.Second)

	f, sf := checkSequences(t, q, nc, js, o, wp, plan, windows)
	if servers > 1 {
		f.pauses = pausesAround(o, windows)
	}
	t.Logf("%s sequence run on %s: %d worker kills, %d server kills, %d leader kills; enqueue %s (%d retried, %d duplicate), processing %s, total %s\n%s\n%s\n%s%s",
		sc.name, where, fs.kills, fs.serverKill, fs.leaderKill, enqueueTime.Round(time.Millisecond), est.retries.Load(), est.duplicates.Load(),
		processing.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond), seqTimes(o, plan), seqBatches(o, &est), sf, f)
}

// seqTimes sums up the sequences' pace from the records' history: the longest waits
// between a job's predecessor's done write and its release (a worker that dies
// between its commit and the telling leaves that to the next delivery, an AckWait
// later), between its release (or its create, queued) and its first claim, and
// between its first claim and its done write (a worker killed while it ran the job
// leaves it to the next delivery); and the job done last.
func seqTimes(o *observer, plan seqPlan) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	byKey := map[string][]*revision{}
	for _, r := range o.revs {
		byKey[r.key] = append(byKey[r.key], r)
	}
	var tell, claim, finish time.Duration
	var tellJob, claimJob, finishJob, lastJob string
	var last time.Time
	for _, ids := range plan.jobs {
		var prevDone time.Time
		for _, id := range ids {
			revs := byKey[id]
			slices.SortFunc(revs, func(a, b *revision) int { return cmp.Compare(a.seq, b.seq) })
			var queued, claimed, done time.Time
			for _, r := range revs {
				switch {
				case r.rec.State == "queued" && queued.IsZero():
					queued = r.at
				case r.rec.State == "running" && claimed.IsZero():
					claimed = r.at
				case r.rec.State == "done":
					done = r.at
				}
			}
			if len(revs) > 0 && revs[0].rec.State == "waiting" && !prevDone.IsZero() && !queued.IsZero() {
				if d := queued.Sub(prevDone); d > tell {
					tell, tellJob = d, id
				}
			}
			if !queued.IsZero() && !claimed.IsZero() {
				if d := claimed.Sub(queued); d > claim {
					claim, claimJob = d, id
				}
			}
			if !claimed.IsZero() && !done.IsZero() {
				if d := done.Sub(claimed); d > finish {
					finish, finishJob = d, id
				}
			}
			if done.After(last) {
				last, lastJob = done, id
			}
			prevDone = done
		}
	}
	return fmt.Sprintf("longest from a job's predecessor done to its release: %s (%s: %s); from a release to the first claim: %s (%s: %s); from a first claim to done: %s (%s: %s); done last: %s: %s",
		tell.Round(time.Millisecond), tellJob, history(byKey[tellJob]), claim.Round(time.Millisecond), claimJob, history(byKey[claimJob]),
		finish.Round(time.Millisecond), finishJob, history(byKey[finishJob]), lastJob, history(byKey[lastJob]))
}

// seqBatches sums up the batches (EnqueueBatch) of a run: their jobs and results, and
// how they landed, told from the records' history. A batch that landed as one atomic
// batch of the records bucket wrote its jobs' records in one run of revisions, with
// only their successor links between them and its keys' tails right after; one that
// fell back to job by job (a tail moved between its read and the batch: a key's last
// job ended; or its outcome was unknown) wrote each job's tail before the job's
// record. A batch is not told when a revision of that run was not heard (a kill
// window).
func seqBatches(o *observer, st *enqueueStats) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	created := map[string]*revision{} // each key's first revision heard
	for _, r := range o.revs {
		if c := created[r.key]; c == nil || r.seq < c.seq {
			created[r.key] = r
		}
	}
	var jobs, failed, afterFailed, dups, waiting, whole, apart, apartConfirmed, untold, largest int
	var apartIDs []string
	for _, b := range st.batches {
		jobs += len(b.ids)
		largest = max(largest, len(b.ids))
		failed += b.failed
		afterFailed += len(b.afterFailed)
		dups += b.duplicates
		waiting += b.waiting
		ours := map[uint64]bool{}
		lo, hi := uint64(1<<63), uint64(0)
		told := true
		for _, id := range b.ids {
			c := created[id]
			if c == nil || c.readBack || c.prev != 0 {
				told = false // its create was not heard
				break
			}
			ours[c.seq] = true
			lo, hi = min(lo, c.seq), max(hi, c.seq)
		}
		one := told
		for s := lo; told && one && s <= hi+uint64(b.keys); s++ {
			r := o.revs[s]
			switch {
			case r == nil:
				told = false
			case ours[s]:
			case s < hi && strings.HasPrefix(r.key, "==.next."):
			case s > hi && strings.HasPrefix(r.key, "==.seq."):
			default:
				one = false
			}
		}
		switch {
		case !told:
			untold++
		case one:
			whole++
		default:
			apart++
			if b.failed == 0 {
				apartConfirmed++
				if len(apartIDs) < 5 {
					apartIDs = append(apartIDs, b.ids[0])
				}
			}
		}
	}
	return fmt.Sprintf("batches: %d jobs in %d batches (up to %d jobs), %d with Enqueue; results: %d failed (enqueued again with Enqueue), %d jobs confirmed after a failed job of their key in the batch, %d duplicate, %d waiting; "+
		"landed as one atomic batch %d, job by job %d (%d of them with every result confirmed: fell back, e.g. the batches of %v), not told (a revision unheard) %d",
		jobs, len(st.batches), largest, st.single.Load(), failed, afterFailed, dups, waiting, whole, apart, apartConfirmed, apartIDs, untold)
}

// seqUnfinished lists the jobs whose latest revision heard has not ended, with
// their history.
func seqUnfinished(o *observer, plan seqPlan) string {
	var b strings.Builder
	listed := 0
	for k, ids := range plan.jobs {
		for _, id := range ids {
			o.mu.Lock()
			l := o.latest[id]
			o.mu.Unlock()
			if l != nil && terminal(l) {
				continue
			}
			if listed++; listed > 40 {
				b.WriteString("  … and more\n")
				return b.String()
			}
			fmt.Fprintf(&b, "  %s (key %q): %s\n", id, plan.keys[k], o.historyOf(id))
		}
	}
	return b.String()
}

// linkHistory is a link key's writes, for a message.
func linkHistory(revs []*revision) string {
	var s []string
	for _, r := range revs {
		op := r.op
		if op == "" {
			op = string(r.raw)
		}
		s = append(s, fmt.Sprintf("rev %d (prev %d) %s %s", r.seq, r.prev, r.at.Format("15:04:05.000"), op))
	}
	return "[" + strings.Join(s, "; ") + "]"
}

// linkedJobs is, for a message, the history of the job link (at key) names, and of
// the job whose successor it is, for a successor link.
func linkedJobs(byKey map[string][]*revision, key string, link *revision) string {
	var s string
	if rest, ok := strings.CutPrefix(key, "==.next."); ok { // ==.next.<key>.<id>: a plain id is its own token
		pred := rest[strings.LastIndexByte(rest, '.')+1:]
		s = fmt.Sprintf("; job %s: %s", pred, history(byKey[pred]))
	}
	var l struct {
		Job string `json:"job"`
	}
	if json.Unmarshal(link.raw, &l) == nil && l.Job != "" {
		s += fmt.Sprintf("; job %s: %s", l.Job, history(byKey[l.Job]))
	}
	return s
}

// liveLinks are the sequence links (keys under "==.") that the records bucket's
// stream still holds.
func liveLinks(t *testing.T, js jetstream.JetStream, stream string) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("records stream: %v", err)
	}
	bucket := "$KV." + strings.TrimPrefix(stream, "KV_") + "."
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(bucket+"==.>"))
	if err != nil {
		t.Fatalf("records stream's links: %v", err)
	}
	live := map[string]bool{}
	for subj := range info.State.Subjects {
		live[strings.TrimPrefix(subj, bucket)] = true
	}
	return live
}

func hasRun(byToken map[uint64]run, token uint64) bool { _, ok := byToken[token]; return ok }

// seqFields are the sequence's fields of a job record.
type seqFields struct {
	Key   string `json:"sequence_key"`
	After string `json:"after"`
}

// seqFigures are what the check counts beyond figures.
type seqFigures struct {
	createdWaiting int // jobs enqueued while the job before them had not ended
	createdQueued  int // jobs (not a key's first) enqueued after the one before them ended
	linkKeys       int // keys of tails and successor links written
	linksLeft      int // of them, still there at the end: a violation (no job dies, so no tail stays)
	linksBack      int // still there at the end after a server's SIGKILL brought their purge back (see checkSequences)
}

func (s seqFigures) String() string {
	return fmt.Sprintf("jobs created waiting for the one before them %d, created queued (the one before had ended) %d; sequence links (tails, successors) %d keys, %d left at the end, %d back after the server's kill (not counted waiting)\n",
		s.createdWaiting, s.createdQueued, s.linkKeys, s.linksLeft, s.linksBack)
}

// checkSequences checks the run from the complete history of the records and the
// workers' run logs (see the top of this file).
func checkSequences(t *testing.T, q string, nc *nats.Conn, js jetstream.JetStream, o *observer, wp *workerPool, plan seqPlan, windows []window) (figures, seqFigures) {
	t.Helper()
	var f figures
	var sf seqFigures
	f.jobs = plan.size()
	unknownRev := completeHistory(t, nc, js, o, windows, &f)
	live := liveLinks(t, js, o.stream)
	serverKilled := slices.ContainsFunc(windows, func(w window) bool { return strings.HasPrefix(w.what, "nats-server kill") })
	// The queue's counts see nothing waiting: every job ended, and a link the server
	// brought back names a job that ended.
	bctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	backlog, err := workflow.SequenceBacklog(bctx, record.Store{JS: js, Bucket: strings.TrimPrefix(o.stream, "KV_")})
	cancel()
	if err != nil || backlog.Jobs != 0 || backlog.Keys != 0 {
		t.Errorf("VIOLATION: the sequences' backlog at the end: %+v, %v; want nothing waiting", backlog, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()

	byKey, runsOf := histories(o, wp, &f)
	for _, c := range deadLetters(t, js, q) {
		f.deadLetters += c
	}
	if f.deadLetters != 0 {
		t.Errorf("VIOLATION: %d dead letters; no job fails", f.deadLetters)
	}
	isJob := map[string]bool{}
	for _, ids := range plan.jobs {
		for _, id := range ids {
			isJob[id] = true
		}
	}
	for key, revs := range byKey {
		switch {
		case strings.HasPrefix(key, "==."):
			// A tail or successor link (internal/workflow/sequence.go): the end that
			// no longer needs it drops it (a KV purge, whose marker expires: the server
			// says which keys are left), and no job dies here (a dead last job's tail
			// stays), so none is left once every job ended. But a single server
			// SIGKILLed may undo removals (with the stream's purge API, about 2% of
			// the links purged in the tens of seconds before the kill came back): such
			// a link names an ended job, which the counts skip (checked above).
			sf.linkKeys++
			if last := revs[len(revs)-1]; last.op == "" && live[key] {
				if serverKilled {
					sf.linksBack++
					break
				}
				if sf.linksLeft++; sf.linksLeft <= 5 {
					t.Errorf("VIOLATION: sequence link %s left at the end: %s; its writes: %s%s", key, last.raw, linkHistory(revs), linkedJobs(byKey, key, last))
				}
			}
		case !isJob[key]:
			t.Errorf("VIOLATION: a record for %s, no job enqueued: %s", key, history(revs))
		}
	}

	for k, key := range plan.keys {
		var before *revision // the done write of the key's job before this one
		for i, id := range plan.jobs[k] {
			revs, runs := byKey[id], runsOf[id]
			desc := func() string {
				s := "history: " + history(revs) + "; runs:"
				for _, r := range runs {
					s += fmt.Sprintf(" [attempt %d on %s, token %d, at %s]", r.attempt, r.worker, r.token, r.at.Format("15:04:05.000"))
				}
				if u := unknownRev[id]; len(u) > 0 {
					s += fmt.Sprintf("; unheard revisions %v", u)
				}
				if i > 0 {
					s += fmt.Sprintf("; the job before it, %s: %s", plan.jobs[k][i-1], history(byKey[plan.jobs[k][i-1]]))
				}
				return s
			}
			prevDone := before
			before = nil
			if len(runs) > 0 {
				f.jobsRan++
				f.extraRuns += len(runs) - 1
			} else {
				t.Errorf("VIOLATION (never ran): job %s (key %q) has no run; %s", id, key, desc())
			}
			tokens := distinctRuns(t, "job "+id, runs, &f, desc)
			if len(revs) == 0 {
				t.Errorf("VIOLATION (lost job): job %s (key %q) has no record; %s", id, key, desc())
				continue
			}
			if i > 0 && prevDone == nil {
				t.Errorf("VIOLATION: job %s (key %q) has a record, the job before it, %s, did not end done; %s", id, key, plan.jobs[k][i-1], desc())
			}

			// Its place in the sequence: its key, and the job it waits for, the same in
			// every write (a claim carries them over).
			var sq seqFields
			for j, r := range revs {
				var s seqFields
				if err := json.Unmarshal(r.raw, &s); err != nil {
					t.Errorf("VIOLATION: job %s: rev %d (op %q) is no record: %v; %s", id, r.seq, r.op, err, desc())
					continue
				}
				if j == 0 {
					sq = s
				}
				if s != sq || s.Key != key {
					t.Errorf("VIOLATION: job %s: rev %d names key %q after %q, want key %q (and the after of rev %d, %q); %s",
						id, r.seq, s.Key, s.After, key, revs[0].seq, sq.After, desc())
				}
			}
			// The lowest revision known of the job: its create, or below it.
			created := revs[0].seq
			for _, s := range unknownRev[id] {
				created = min(created, s)
			}
			var waitFor []string
			switch {
			case i == 0 && sq.After != "":
				t.Errorf("VIOLATION: job %s, the first of key %q, waits for %q; %s", id, key, sq.After, desc())
			case i == 0:
			case sq.After == plan.jobs[k][i-1]:
				sf.createdWaiting++
				waitFor = []string{sq.After}
			case sq.After != "":
				t.Errorf("VIOLATION (out of order): job %s of key %q waits for %q, not %s, the job enqueued before it; %s", id, key, sq.After, plan.jobs[k][i-1], desc())
			default:
				sf.createdQueued++
				if prevDone != nil && created <= prevDone.seq {
					t.Errorf("VIOLATION (out of order): job %s of key %q was created at rev %d waiting for nothing, before the job before it, %s, was done at rev %d; %s",
						id, key, created, plan.jobs[k][i-1], prevDone.seq, desc())
				}
			}
			checkRelease(t, id, waitFor, waitFor, 0, revs, o.revs, desc)
			// Released (its first write not waiting) after the job before it was done.
			if prevDone != nil && waitFor != nil {
				for _, r := range revs {
					if r.rec.State != "waiting" {
						if r.seq <= prevDone.seq {
							t.Errorf("VIOLATION (released early): job %s left waiting at rev %d (%s), before the job before it, %s, was done at rev %d; %s",
								id, r.seq, r.rec.State, plan.jobs[k][i-1], prevDone.seq, desc())
						}
						break
					}
				}
			}

			// It ended once, done.
			var ends []*revision
			for _, r := range revs {
				if terminal(r) {
					ends = append(ends, r)
				}
			}
			final := revs[len(revs)-1]
			switch {
			case final.rec.State == "dead":
				f.dead++
				fallthrough
			case final.rec.State != "done":
				t.Errorf("VIOLATION: job %s (key %q) ended %s (%s), not done; %s", id, key, final.rec.State, final.rec.LastError, desc())
				continue
			case len(ends) != 1:
				t.Errorf("VIOLATION (ended %d times): job %s (key %q); %s", len(ends), id, key, desc())
				continue
			}
			f.done++
			before = final
			token, ok := resultToken(final.rec.Result)
			switch {
			case !ok || resultValue(final.rec.Result) != id:
				t.Errorf("VIOLATION: job %s committed result %q, not its id and a token; %s", id, final.rec.Result, desc())
			case !hasRun(tokens, token):
				t.Errorf("VIOLATION: job %s committed on token %d, but no run with that token started; %s", id, token, desc())
			}

			// Order: every claim and every run of it after the job before it was done,
			// and before its own done write.
			for _, r := range revs {
				if r.rec.State == "running" && prevDone != nil && r.seq <= prevDone.seq {
					t.Errorf("VIOLATION (ran before the job before it ended): job %s claimed at rev %d (%s), the job before it, %s, was done at rev %d; %s",
						id, r.seq, r.rec.Run, plan.jobs[k][i-1], prevDone.seq, desc())
				}
			}
			for _, r := range runs {
				if prevDone != nil && r.token <= prevDone.seq {
					t.Errorf("VIOLATION (ran before the job before it ended): job %s ran on a claim at rev %d (attempt %d on %s), the job before it, %s, was done at rev %d; %s",
						id, r.token, r.attempt, r.worker, plan.jobs[k][i-1], prevDone.seq, desc())
				}
				if prevDone != nil && !r.at.IsZero() && r.at.Before(prevDone.at) {
					t.Errorf("VIOLATION (ran before the job before it ended): job %s: a run (token %d on %s) started %s before the job before it, %s, was done; %s",
						id, r.token, r.worker, prevDone.at.Sub(r.at), plan.jobs[k][i-1], desc())
				}
				if r.token >= final.seq {
					t.Errorf("VIOLATION (run after its commit): job %s ran on a claim at rev %d, after its done write at rev %d; %s", id, r.token, final.seq, desc())
				}
				if rv := o.revs[r.token]; rv != nil && (rv.key != id || rv.rec.State != "running") {
					t.Errorf("VIOLATION: job %s ran with token %d, which is not a claim of it (rev %d is %s %s); %s", id, r.token, rv.seq, rv.key, rv.rec.State, desc())
				}
			}
		}
	}
	f.reassigned = wp.logLines("was reassigned")
	if left := jobsLeft(t, js, q); left != 0 {
		t.Errorf("VIOLATION: the jobs stream WORKQ_%s holds %d messages after every job ended and the workers stopped:\n%s", q, left, leftover(js, q))
	}
	return f, sf
}
