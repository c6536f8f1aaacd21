package protocol

import (
	"container/heap"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The simulation: a deterministic model of the engine beneath the protocol, driven
// by a seed, in which workers decide with DecideClaim and Landed. The engine model
// has what the real one does to workq (docs/delivery.md, "Why: the engine forgets"):
//
//   - a WorkQueue stream with per-message delivery counts, AckWait redelivery, acks
//     and progress reports matched by stream sequence (a stale one is accepted);
//   - a server that crashes and restarts forgetting what it had not flushed (every
//     100 ms): deliveries since are sent again as first deliveries, acks since are lost
//     (and with them, now and then, the removal of the acked message, or only the
//     removal while the ack stays: a message that is never delivered again), and the
//     ids of removed messages, so that a producer retrying an enqueue stores a copy;
//   - the consumer reset (delivery counts restart);
//   - record writes (compare-and-set) that fail, or land with their reply lost;
//   - workers that crash, freeze past their lease, and run with skewed clocks.
//
// Every history is checked for the invariants of docs/delivery.md: at most one
// committed result per enqueue; a run's claim is taken over only after it went a
// whole lease without a renewal; no handler starts after its enqueue's record became
// terminal; a cancelled job never commits; attempts count claims exactly, and every
// run is a claim (a claim counts an attempt though its worker died before the
// handler started, or never learnt that it landed); and, once faults stop, every
// job ends and the stream empties.
//
// go test ./internal/protocol -run TestSimulation -seeds 100000 runs more seeds;
// -seed N replays one, -v with it prints its history.

var (
	seeds   = flag.Int("seeds", 5000, "simulation seeds to run")
	oneSeed = flag.Int64("seed", -1, "run only this seed (with -v: print its history)")
)

// TestSimulation runs the protocol through the seeds and fails on the first seed
// whose history breaks an invariant, naming it for a replay.
func TestSimulation(t *testing.T) {
	if *oneSeed >= 0 {
		s := newSim(*oneSeed, "", testing.Verbose())
		if err := s.run(); err != nil {
			t.Fatalf("seed %d: %v", *oneSeed, err)
		}
		return
	}
	seen := map[string]int{}
	for seed := range int64(*seeds) {
		s := newSim(seed, "", false)
		if err := s.run(); err != nil {
			t.Fatalf("seed %d: %v (replay: go test ./internal/protocol -run TestSimulation -seed %d -v)", seed, err, seed)
		}
		for k, n := range s.seen {
			seen[k] += n
		}
	}
	t.Logf("over %d seeds: %v", *seeds, seen)
	// The histories went through every path, or a passing run proves little.
	for _, k := range []string{"claim", "ack", "term", "exhausted", "watch", "later", "takeover", "first delivery of an ended job",
		"claim landed, reply lost", "settle refused", "stuck message swept", "copy of an enqueue stored again"} {
		if seen[k] == 0 && *seeds >= 1000 {
			t.Errorf("no history of %d seeds went through %q", *seeds, k)
		}
	}
}

// The simulation finds what each reverted rule breaks, within the CI seeds: it can
// fail. Each mutant is a rule of the older protocol.
func TestSimulationFindsRevertedRules(t *testing.T) {
	for _, c := range []struct {
		mutant, want string
	}{
		// Finding 1: a first delivery ran without reading the record (a lazy
		// claim); the server re-sends forgotten deliveries as first ones.
		{"lazy-first", "started after its record was terminal"},
		// Finding 2: only done ended every copy; a cancelled or dead record was
		// taken for another message's when a forgotten id let a copy in.
		{"done-only", "started after its record was terminal"},
		// Finding 6: attempts taken from JetStream's delivery count, which a crash
		// or a reset restarts.
		{"count-attempts", "attempts"},
	} {
		t.Run(c.mutant, func(t *testing.T) {
			for seed := range int64(*seeds) {
				err := newSim(seed, c.mutant, false).run()
				if err != nil && strings.Contains(err.Error(), c.want) {
					t.Logf("seed %d: %v", seed, err)
					return
				}
			}
			t.Fatalf("no seed of %d found the mutant %s (%q)", *seeds, c.mutant, c.want)
		})
	}
}

const (
	simAckWait   = time.Second
	simHeartbeat = 300 * time.Millisecond
	simLease     = time.Second
	simFaults    = 15 * time.Second // faults are injected until then
	simHorizon   = 90 * time.Second // every job must have ended by then
	simMax       = 3                // attempts allowed
)

type event struct {
	at  time.Duration
	seq int
	fn  func()
}

type events []*event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	return e[i].at < e[j].at || e[i].at == e[j].at && e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(*event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// job is what the producer enqueued: one enqueue of an id, and how its handler
// behaves.
type job struct {
	id, enqueue string
	fails       int           // attempts that fail before one succeeds; simMax or more: always
	runtime     time.Duration // how long a run takes
}

type message struct {
	seq         uint64
	id, enqueue string
	inStream    bool
}

// consumerState is the server's state of one message in the workers' consumer.
type consumerState struct {
	delivered int
	pending   bool
	deadline  time.Duration
	acked     bool
}

type kvEntry struct {
	rec Record
	seq uint64 // the message the record's last claim came from (mutant done-only)
}

type sim struct {
	rng     *rand.Rand
	mutant  string
	verbose bool
	now     time.Duration
	q       events
	nseq    int
	err     error

	// The server.
	up       bool
	msgs     []*message
	cons     map[uint64]*consumerState
	flushed  map[uint64]consumerState
	ackedAt  map[uint64]bool // acked since the last flush
	dedup    map[string]bool // message ids the server remembers
	kv       map[string]*kvEntry
	revision uint64

	jobs      []*job
	workers   []*worker
	processes int // worker processes started: each names its runs

	// What happened, for the invariants, by enqueue.
	seen map[string]int // what happened, by kind: the coverage TestSimulation requires

	starts    map[string]int           // handlers started
	claims    map[string]int           // claims written (a run's renewals are not claims)
	renewed   map[string]time.Duration // by run: when its claim was last written
	commits   map[string]int
	ended     map[string]State // the first terminal state written
	cancelled map[string]bool
}

type worker struct {
	n      int
	skew   time.Duration // added to the true time: the worker's clock
	slots  int           // free handler slots
	cap    int           // handler slots
	dead   bool
	frozen time.Duration // frozen until then
	runs   int           // run ids made
}

// delivery is one delivery a worker holds.
type delivery struct {
	w     *worker
	m     *message
	count int
}

func newSim(seed int64, mutant string, verbose bool) *sim {
	s := &sim{
		rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), mutant: mutant, verbose: verbose, up: true,
		cons: map[uint64]*consumerState{}, flushed: map[uint64]consumerState{}, ackedAt: map[uint64]bool{},
		dedup: map[string]bool{}, kv: map[string]*kvEntry{},
		seen: map[string]int{}, starts: map[string]int{}, claims: map[string]int{}, renewed: map[string]time.Duration{}, commits: map[string]int{}, ended: map[string]State{}, cancelled: map[string]bool{},
	}
	s.processes = 2 + s.rng.IntN(3)
	for i := range s.processes {
		slots := 1 + s.rng.IntN(3)
		s.workers = append(s.workers, &worker{n: i, skew: time.Duration(s.rng.IntN(400)-200) * time.Millisecond, slots: slots, cap: slots})
	}
	for i := range 10 + s.rng.IntN(20) {
		j := &job{id: "j" + strconv.Itoa(i), enqueue: "e" + strconv.Itoa(i), runtime: time.Duration(20+s.rng.IntN(400)) * time.Millisecond}
		switch r := s.rng.IntN(10); {
		case r == 0:
			j.fails = simMax // poison
		case r < 3:
			j.fails = 1 + s.rng.IntN(2)
		}
		if s.rng.IntN(8) == 0 {
			j.runtime = time.Duration(1500+s.rng.IntN(2000)) * time.Millisecond // outlives the lease: heartbeats carry it
		}
		s.jobs = append(s.jobs, j)
		s.at(time.Duration(s.rng.IntN(3000))*time.Millisecond, func() { s.enqueue(j) })
	}
	s.every(10*time.Millisecond, s.deliver)
	s.every(100*time.Millisecond, s.flush)
	s.every(time.Second, s.sweep)
	s.faults()
	return s
}

func (s *sim) logf(format string, args ...any) {
	if s.verbose {
		fmt.Fprintf(os.Stderr, "%8s  %s\n", s.now, fmt.Sprintf(format, args...))
	}
}

func (s *sim) at(d time.Duration, fn func()) {
	s.nseq++
	heap.Push(&s.q, &event{at: s.now + d, seq: s.nseq, fn: fn})
}

func (s *sim) every(d time.Duration, fn func()) {
	var tick func()
	tick = func() { fn(); s.at(d, tick) }
	s.at(d, tick)
}

func (s *sim) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("at %s: %s", s.now, fmt.Sprintf(format, args...))
	}
}

// faults schedules the faults of the first simFaults of the history.
func (s *sim) faults() {
	for range 1 + s.rng.IntN(3) { // server crashes
		s.at(time.Duration(s.rng.Int64N(int64(simFaults))), s.crash)
	}
	if s.rng.IntN(3) == 0 {
		s.at(time.Duration(s.rng.Int64N(int64(simFaults))), s.resetConsumer)
	}
	for _, w := range s.workers {
		switch s.rng.IntN(4) {
		case 0:
			s.at(time.Duration(s.rng.Int64N(int64(simFaults))), func() {
				w.frozen = s.now + simLease + time.Duration(s.rng.Int64N(int64(2*simLease)))
				s.logf("worker %d freezes until %s", w.n, w.frozen)
			})
		case 1:
			s.at(time.Duration(s.rng.Int64N(int64(simFaults))), func() {
				// It dies with its runs and memory; a new process takes its place.
				s.logf("worker %d dies", w.n)
				w.dead = true
				s.processes++
				nw := &worker{n: s.processes, skew: w.skew, slots: w.cap, cap: w.cap}
				s.at(500*time.Millisecond, func() { s.workers = append(s.workers, nw) })
			})
		}
	}
	for _, j := range s.jobs {
		if s.rng.IntN(10) == 0 {
			s.at(time.Duration(s.rng.Int64N(int64(simFaults))), func() { s.cancel(j) })
		}
	}
}

func (s *sim) faulty() bool { return s.now < simFaults }

// run plays the history to the horizon and checks the invariants.
func (s *sim) run() error {
	for s.q.Len() > 0 && s.err == nil {
		e := heap.Pop(&s.q).(*event)
		if e.at > simHorizon || s.now > simFaults && s.settled() == nil {
			break
		}
		s.now = e.at
		e.fn()
	}
	if s.err != nil {
		return s.err
	}
	return s.settled()
}

// settled checks that every job has ended, as many times as it ran, and that the
// stream is empty.
func (s *sim) settled() error {
	for _, j := range s.jobs {
		e := s.kv[j.id]
		switch {
		case e == nil || e.rec.Enqueue != j.enqueue || !e.rec.State.Terminal():
			return fmt.Errorf("job %s has not ended by %s: %+v", j.id, simHorizon, e)
		case e.rec.Attempt != s.claims[j.enqueue] || s.starts[j.enqueue] > s.claims[j.enqueue]:
			return fmt.Errorf("job %s: record says %d attempts; %d claims were written, %d runs started", j.id, e.rec.Attempt, s.claims[j.enqueue], s.starts[j.enqueue])
		}
	}
	for _, m := range s.msgs {
		if m.inStream {
			return fmt.Errorf("message %d (job %s) is still in the stream at %s", m.seq, m.id, simHorizon)
		}
	}
	return nil
}
