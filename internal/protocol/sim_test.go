package protocol

import (
	"container/heap"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// The simulation: a deterministic model of the engine beneath the protocol, driven
// by a seed, in which workers decide with DecideClaim and Landed. The engine model
// has what the real one does to workq (DESIGN.md's engine facts):
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
				if err != nil && containsText(err.Error(), c.want) {
					t.Logf("seed %d: %v", seed, err)
					return
				}
			}
			t.Fatalf("no seed of %d found the mutant %s (%q)", *seeds, c.mutant, c.want)
		})
	}
}

func containsText(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
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
	seen   map[string]seenRev
	runs   int // run ids made
}

type seenRev struct {
	rev   uint64
	since time.Duration
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
		s.workers = append(s.workers, &worker{n: i, skew: time.Duration(s.rng.IntN(400)-200) * time.Millisecond, slots: slots, cap: slots, seen: map[string]seenRev{}})
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
				nw := &worker{n: s.processes, skew: w.skew, slots: w.cap, cap: w.cap, seen: map[string]seenRev{}}
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

// The server.

func (s *sim) enqueue(j *job) {
	if !s.up {
		s.at(100*time.Millisecond, func() { s.enqueue(j) }) // the producer retries
		return
	}
	if s.dedup[j.id] {
		return
	}
	if s.kv[j.id] != nil {
		s.seen["copy of an enqueue stored again"]++
	}
	m := &message{seq: uint64(len(s.msgs) + 1), id: j.id, enqueue: j.enqueue, inStream: true}
	s.msgs = append(s.msgs, m)
	s.cons[m.seq] = &consumerState{}
	s.dedup[j.id] = true
	s.logf("stored message %d of job %s", m.seq, j.id)
}

func (s *sim) flush() {
	if !s.up {
		return
	}
	s.flushed = map[uint64]consumerState{}
	for seq, c := range s.cons {
		s.flushed[seq] = *c
	}
	s.ackedAt = map[uint64]bool{}
}

// crash takes the server down for a moment; it comes back with what it flushed.
func (s *sim) crash() {
	if !s.up {
		return
	}
	s.up = false
	s.logf("server crashes")
	s.at(time.Duration(200+s.rng.IntN(800))*time.Millisecond, func() {
		s.up = true
		for seq, c := range s.cons {
			f, ok := s.flushed[seq]
			if !ok {
				f = consumerState{}
			}
			m := s.msgs[seq-1]
			if s.ackedAt[seq] {
				switch s.rng.IntN(4) {
				case 0: // the removal is lost with the ack: delivered again
					m.inStream = true
				case 1: // the removal is lost, the ack survives: never delivered again
					m.inStream, f.acked = true, true
				}
			}
			*c = f
		}
		s.dedup = map[string]bool{}
		for _, m := range s.msgs {
			if m.inStream {
				s.dedup[m.id] = true
			}
		}
		s.logf("server back; it forgot %d acks and the ids of removed messages", len(s.ackedAt))
		// Producers whose enqueue replies the crash lost enqueue again.
		for range 1 + s.rng.IntN(4) {
			s.enqueue(s.jobs[s.rng.IntN(len(s.jobs))])
		}
	})
}

func (s *sim) resetConsumer() {
	s.logf("consumer reset")
	for seq := range s.cons {
		s.cons[seq] = &consumerState{}
	}
}

// deliver hands the next available messages to free slots.
func (s *sim) deliver() {
	if !s.up {
		return
	}
	for _, w := range s.workers {
		for w.slots > 0 && !w.dead && w.frozen <= s.now {
			m := s.next()
			if m == nil {
				return
			}
			c := s.cons[m.seq]
			c.delivered++
			c.pending, c.deadline = true, s.now+simAckWait
			w.slots--
			d := &delivery{w: w, m: m, count: c.delivered}
			s.logf("deliver message %d (job %s) to worker %d, count %d", m.seq, m.id, w.n, c.delivered)
			s.step(d, s.handle)
		}
	}
}

func (s *sim) next() *message {
	for _, m := range s.msgs {
		c := s.cons[m.seq]
		if m.inStream && !c.acked && (!c.pending || c.deadline <= s.now) {
			return m
		}
	}
	return nil
}

// ack removes the message, as a WorkQueue stream does, whoever acks it.
func (s *sim) ack(m *message) {
	if !s.up {
		return
	}
	c := s.cons[m.seq]
	c.acked, c.pending = true, false
	m.inStream = false
	s.ackedAt[m.seq] = true
}

func (s *sim) progress(m *message) {
	if c := s.cons[m.seq]; s.up && c.pending && !c.acked {
		c.deadline = s.now + simAckWait
	}
}

func (s *sim) nak(m *message, delay time.Duration) {
	if c := s.cons[m.seq]; s.up && !c.acked {
		c.pending, c.deadline = true, s.now+delay
	}
}

// sweep removes messages whose enqueue's record is terminal and that no worker
// holds: also those the server counts as acked though they stayed in the stream.
func (s *sim) sweep() {
	if !s.up {
		return
	}
	for _, m := range s.msgs {
		c := s.cons[m.seq]
		if e := s.kv[m.id]; m.inStream && (c.acked || !c.pending || c.deadline <= s.now) && e != nil && e.rec.Enqueue == m.enqueue && e.rec.State.Terminal() {
			if c.acked {
				s.seen["stuck message swept"]++
			}
			s.logf("sweep removes message %d", m.seq)
			m.inStream = false
		}
	}
}

// outcome is what a record write's caller learns.
type outcome int

const (
	written  outcome = iota
	conflict         // the record changed since it was read
	failed           // not written
	unknown          // written, but the reply was lost
)

// write writes next over revision prev (0: no record) of id.
func (s *sim) write(id string, prev uint64, next Record, seq uint64) (Record, outcome) {
	if !s.up || s.faulty() && s.rng.IntN(20) == 0 {
		return Record{}, failed
	}
	var cur Record
	if e := s.kv[id]; e != nil {
		cur = e.rec
	}
	if cur.Revision != prev {
		return Record{}, conflict
	}
	if next.State == Running && next.Run != cur.Run {
		s.claims[next.Enqueue]++
		if cur.State == Running && s.now-s.renewed[cur.Run] < cur.Lease {
			s.fail("job %s: run %s took over from run %s %s after its last renewal, within its lease of %s",
				id, next.Run, cur.Run, s.now-s.renewed[cur.Run], cur.Lease)
		}
	}
	if next.State == Running {
		s.renewed[next.Run] = s.now
	}
	s.revision++
	next.Revision = s.revision
	s.kv[id] = &kvEntry{rec: next, seq: seq}
	if next.State.Terminal() {
		s.terminal(id, next)
	}
	if s.faulty() && s.rng.IntN(20) == 0 {
		return next, unknown
	}
	return next, written
}

// terminal checks a terminal write against what the enqueue went through.
func (s *sim) terminal(id string, r Record) {
	if first, ok := s.ended[r.Enqueue]; ok {
		s.fail("job %s (enqueue %s) written %s after it was %s", id, r.Enqueue, r.State, first)
		return
	}
	s.ended[r.Enqueue] = r.State
	if r.State == Done {
		s.commits[r.Enqueue]++
	}
}

func (s *sim) read(id string) (*Record, bool) {
	if !s.up || s.faulty() && s.rng.IntN(30) == 0 {
		return nil, false
	}
	if e := s.kv[id]; e != nil {
		r := e.rec
		return &r, true
	}
	return nil, true
}

// cancel cancels job j as the producer does: its record written cancelled by
// compare-and-set.
func (s *sim) cancel(j *job) {
	for range 4 {
		r, ok := s.read(j.id)
		if !ok {
			return
		}
		var prev uint64
		var next Record
		switch {
		case r == nil:
			next = Record{State: Cancelled, Enqueue: j.enqueue}
		case r.Enqueue != j.enqueue || r.State.Terminal():
			return
		default:
			next, prev = *r, r.Revision
			next.State = Cancelled
		}
		if _, o := s.write(j.id, prev, next, 0); o != conflict {
			s.logf("cancel job %s: %v", j.id, o)
			if o == written || o == unknown {
				s.cancelled[j.enqueue] = true
			}
			return
		}
	}
}

// The worker.

// step runs fn for delivery d on its worker after a moment, or after the worker
// thaws; never if it died.
func (s *sim) step(d *delivery, fn func(*delivery)) {
	s.at(time.Millisecond, func() {
		switch {
		case d.w.dead:
		case d.w.frozen > s.now:
			s.at(d.w.frozen-s.now, func() { s.step(d, fn) })
		default:
			fn(d)
		}
	})
}

func (s *sim) release(d *delivery) { d.w.slots++ }

func (s *sim) jobOf(id string) *job {
	for _, j := range s.jobs {
		if j.id == id {
			return j
		}
	}
	return nil
}

// handle is the claim: read the record, decide, act.
func (s *sim) handle(d *delivery) {
	rec, ok := s.read(d.m.id)
	if !ok {
		s.release(d) // redelivered after AckWait
		return
	}
	w := d.w
	var seen Sighting
	if rec != nil {
		sr, ok := w.seen[d.m.id]
		if !ok || sr.rev != rec.Revision {
			sr = seenRev{rev: rec.Revision, since: s.now}
			w.seen[d.m.id] = sr
		}
		seen = Sighting{Revision: sr.rev, For: s.now - sr.since}
	}
	w.runs++
	run := fmt.Sprintf("w%d.%d", w.n, w.runs)
	dec := s.decide(rec, d, seen, run)
	s.logf("worker %d, message %d (job %s) count %d: %s (%s)", w.n, d.m.seq, d.m.id, d.count, dec.Verdict, dec.Why)
	s.seen[dec.Verdict.String()]++
	if dec.Verdict == Claim && rec != nil && rec.State == Running {
		s.seen["takeover"]++
	}
	if (dec.Verdict == Ack || dec.Verdict == Term) && d.count == 1 {
		s.seen["first delivery of an ended job"]++
	}
	switch dec.Verdict {
	case Claim:
		s.claim(d, dec.Next, run)
	case Ack, Term:
		s.ack(d.m)
		s.release(d)
	case Exhausted:
		next := Record{State: Dead, Enqueue: d.m.enqueue, Run: run}
		var prev uint64
		if rec != nil {
			next.Attempt, prev = rec.Attempt, rec.Revision
		}
		if _, o := s.write(d.m.id, prev, next, d.m.seq); o == written {
			s.ack(d.m)
		}
		s.release(d)
	case Watch:
		s.progress(d.m)
		s.at(min(dec.Wait, simHeartbeat), func() { s.step(d, s.handle) })
	case Later:
		s.nak(d.m, dec.Wait)
		s.release(d)
	}
}

// decide is DecideClaim, or a mutant of it: a rule of the older protocol.
func (s *sim) decide(rec *Record, d *delivery, seen Sighting, run string) Decision {
	dl := Delivery{Enqueue: d.m.enqueue, MaxAttempts: simMax}
	switch s.mutant {
	case "lazy-first":
		if d.count == 1 {
			// Provably current by the delivery count: run at once, claim at commit.
			return Decision{Verdict: Claim, Next: Record{State: Running, Attempt: 1, Enqueue: d.m.enqueue, Run: run, Lease: simLease, Revision: lazy}, Why: "lazy"}
		}
	case "done-only":
		if e := s.kv[d.m.id]; rec != nil && e != nil && rec.Enqueue == d.m.enqueue && (rec.State == Dead || rec.State == Cancelled) && e.seq != d.m.seq {
			return Decision{Verdict: Claim, Next: Record{State: Running, Attempt: 1, Enqueue: d.m.enqueue, Run: run, Lease: simLease, Revision: rec.Revision}, Why: "another message's record"}
		}
	}
	dec := DecideClaim(rec, dl, seen, run, simLease, time.Time{}.Add(s.now+d.w.skew))
	if s.mutant == "count-attempts" && dec.Verdict == Claim {
		dec.Next.Attempt = d.count
	}
	return dec
}

// lazy marks a claim not written before the run (mutant lazy-first).
const lazy = ^uint64(0)

func (s *sim) claim(d *delivery, next Record, run string) {
	if next.Revision == lazy {
		s.start(d, next)
		return
	}
	prev := next.Revision
	r, o := s.write(d.m.id, prev, next, d.m.seq)
	switch o {
	case written:
		s.start(d, r)
	case conflict:
		s.step(d, s.handle)
	case failed:
		s.release(d)
	case unknown:
		// Resolved by reading until it is known, for up to half a lease; a claim
		// still unknown then is not run (it counts an attempt if it landed).
		var resolve func(tries int)
		resolve = func(tries int) {
			cur, ok := s.read(d.m.id)
			switch {
			case ok && Landed(cur, run, Running, prev):
				s.seen["claim landed, reply lost"]++
				s.start(d, *cur)
			case ok, tries >= 10:
				s.release(d)
			default:
				s.at(simLease/20, func() { s.step(d, func(*delivery) { resolve(tries + 1) }) })
			}
		}
		s.step(d, func(*delivery) { resolve(0) })
	}
}

// start runs the handler under claim c.
func (s *sim) start(d *delivery, c Record) {
	if st, ok := s.ended[d.m.enqueue]; ok {
		s.fail("job %s (enqueue %s) started after its record was terminal (%s)", d.m.id, d.m.enqueue, st)
		return
	}
	s.starts[d.m.enqueue]++
	j := s.jobOf(d.m.id)
	end := s.now + j.runtime
	attempt := c.Attempt
	claim := c
	var beat func()
	beat = func() {
		if d.w.dead || claim.Revision == 0 {
			return
		}
		if d.w.frozen > s.now {
			s.at(d.w.frozen-s.now, beat)
			return
		}
		if s.now >= end {
			s.finish(d, claim, attempt <= j.fails)
			return
		}
		s.progress(d.m)
		if claim.Revision != lazy {
			renewed := claim
			r, o := s.write(d.m.id, claim.Revision, renewed, d.m.seq)
			switch o {
			case written:
				claim = r
			case conflict:
				s.logf("worker %d: run of job %s lost its claim; handler cancelled", d.w.n, d.m.id)
				s.release(d)
				return
			case unknown:
				if cur, ok := s.read(d.m.id); ok && Landed(cur, claim.Run, Running, claim.Revision) {
					claim = *cur
				}
			}
		}
		s.at(min(simHeartbeat, end-s.now), beat)
	}
	s.at(min(simHeartbeat, j.runtime), beat)
}

// finish settles a run that ended: commit, retry or dead letter, by compare-and-set
// on the claim.
func (s *sim) finish(d *delivery, claim Record, failedRun bool) {
	next := claim
	switch {
	case !failedRun:
		next.State = Done
	case claim.Attempt >= simMax:
		next.State = Dead
	default:
		next.State, next.RetryAt = Retrying, time.Time{}.Add(s.now+d.w.skew+200*time.Millisecond)
	}
	prev := claim.Revision
	if prev == lazy {
		prev = 0 // the lazy commit: a create that fails if any record exists
	}
	var settle func(tries int)
	settle = func(tries int) {
		_, o := s.write(d.m.id, prev, next, d.m.seq)
		if o == unknown {
			cur, ok := s.read(d.m.id)
			switch {
			case !ok:
				o = failed
			case Landed(cur, next.Run, next.State, prev):
				o = written
			default:
				o = conflict
			}
		}
		switch o {
		case written:
			if next.State == Retrying {
				s.nak(d.m, 200*time.Millisecond)
			} else {
				s.ack(d.m)
			}
			s.release(d)
		case conflict:
			s.seen["settle refused"]++
			s.logf("worker %d: job %s was reassigned; its %s refused", d.w.n, d.m.id, next.State)
			s.release(d)
		case failed:
			if tries < 5 {
				s.at(100*time.Millisecond, func() { s.step(d, func(*delivery) { settle(tries + 1) }) })
				return
			}
			s.release(d)
		}
	}
	settle(0)
	if s.commits[d.m.enqueue] > 1 {
		s.fail("job %s (enqueue %s) committed %d times", d.m.id, d.m.enqueue, s.commits[d.m.enqueue])
	}
	if s.cancelled[d.m.enqueue] && s.commits[d.m.enqueue] > 0 {
		s.fail("job %s (enqueue %s) committed after it was cancelled", d.m.id, d.m.enqueue)
	}
}
