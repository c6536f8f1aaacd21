package workflow

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/workq/workq/internal/record"
)

// The simulation of releases: a seeded model of what the workers, cancellers and the
// records bucket do to a workflow, in which every telling is decided by Tell. A
// random workflow runs while tellers crash at any step (their task's message comes
// back and its next delivery tells again, from the start), writes land with their
// reply lost (the teller reads again and tells again), several parents tell one
// dependent at once, parents die or are cancelled, and dependents run if a parent
// failed or are cancelled with it. A task is also cancelled now and then while it
// runs: its record says cancelled at once, its run goes on, and its worker tells its
// dependents when the run ends (producer.Cancel leaves that to it). The releaser's
// steps are modelled as releaser.go takes them: read, Tell, compare-and-set, then finish what a write
// started, in a step of its own (a teller may die in between): publish the message
// kept in a released task's record, or tell the own dependents of a task cancelled
// before it was ever claimed.
//
// Every history is checked: a task is released (or cancelled for a failed parent) by
// one write only; it is released only once every parent has ended, and the run of a
// parent cancelled as it ran too, and runs only once released; no task waits for a
// parent that has ended once the tellers are done; and every task ends.
//
// go test ./internal/workflow -run TestReleaseSimulation -wfseeds 100000 runs more.

var wfSeeds = flag.Int("wfseeds", 3000, "release simulation seeds to run")

func TestReleaseSimulation(t *testing.T) {
	t.Parallel()
	for seed := range uint64(*wfSeeds) {
		if err := newReleaseSim(seed).run(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// simTask is the model's view of one task beyond its record: what happened to it.
type simTask struct {
	name     string
	queued   bool // its message is on its job subject
	ended    bool // it ended (done, dead or cancelled): its record says so
	goes     bool // cancelled while it ran, and its run goes on: its handler has not returned
	released int  // writes that took it out of waiting
	runs     int
}

// teller is a process telling the dependents of one ended task: a worker settling its
// task, a later delivery of its message, or a releaser cascading a cancel.
type teller struct {
	parent  string
	failed  bool
	next    int // the dependent it is at
	read    *record.Record
	finish  bool    // it has written (or found written) what it tells dep: what the write started is next
	owner   *teller // for a cascade: the teller that cancelled its task, in whose process it runs
	crashes bool    // its task's message stays, so a crash is followed by a new teller (redelivery)
}

// ownedBy reports whether t runs in o's process: o itself, or a cascade it started.
func (t *teller) ownedBy(o *teller) bool {
	for ; t != nil; t = t.owner {
		if t == o {
			return true
		}
	}
	return false
}

type releaseSim struct {
	rng     *rand.Rand
	recs    map[string]*record.Record // the bucket: one revision sequence for all keys
	rev     uint64
	tasks   map[string]*simTask
	order   []string
	tellers []*teller
	now     time.Time
}

func newReleaseSim(seed uint64) *releaseSim {
	s := &releaseSim{rng: rand.New(rand.NewPCG(seed, 7)), recs: map[string]*record.Record{}, tasks: map[string]*simTask{},
		now: time.Unix(1e9, 0)}
	n := 2 + s.rng.IntN(12)
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i].Name = fmt.Sprintf("t%d", i)
		for j := range i {
			if s.rng.IntN(3) == 0 {
				nodes[i].Parents = append(nodes[i].Parents, nodes[j].Name)
			}
		}
	}
	g, err := Check(nodes)
	if err != nil {
		panic(err) // parents only of earlier tasks: no cycle
	}
	for _, nd := range nodes {
		r := &record.Record{ID: "w." + nd.Name, Workflow: "w", Task: nd.Name, State: record.Queued, Parents: nd.Parents,
			Dependents: g.Dependents[nd.Name], RunIfFailed: s.rng.IntN(3) == 0}
		st := &simTask{name: nd.Name, queued: len(nd.Parents) == 0}
		if len(nd.Parents) > 0 {
			r.State, r.WaitingFor = record.Waiting, slices.Clone(nd.Parents)
		}
		s.put(r)
		s.tasks[nd.Name] = st
		s.order = append(s.order, nd.Name)
	}
	return s
}

func (s *releaseSim) put(r *record.Record) {
	s.rev++
	c := *r
	c.Revision = s.rev
	s.recs[r.Task] = &c
}

// run drives the model until nothing is left to do, then checks the end state.
func (s *releaseSim) run() error {
	for step := 0; step < 100000; step++ {
		s.now = s.now.Add(time.Millisecond)
		// What can happen now: a queued task runs and ends (or is cancelled as it
		// runs); the run of a task cancelled as it ran ends; a teller takes a step.
		var runnable []string
		for _, name := range s.order {
			if t := s.tasks[name]; t.queued && !t.ended || t.goes {
				runnable = append(runnable, name)
			}
		}
		if len(runnable) == 0 && len(s.tellers) == 0 {
			return s.check()
		}
		if len(runnable) > 0 && (len(s.tellers) == 0 || s.rng.IntN(3) == 0) {
			name := runnable[s.rng.IntN(len(runnable))]
			if t := s.tasks[name]; t.goes {
				// Its handler returns: its worker settles the cancelled run and tells
				// its dependents (its message stays until then).
				t.goes = false
				s.tellers = append(s.tellers, &teller{parent: name, failed: true, crashes: true})
				continue
			}
			if err := s.runTask(name); err != nil {
				return err
			}
			continue
		}
		i := s.rng.IntN(len(s.tellers))
		if err := s.stepTeller(i); err != nil {
			return err
		}
	}
	return fmt.Errorf("no end after 100000 steps")
}

// runTask runs a released task (its claim counts an attempt) to its end: done
// mostly, dead or cancelled now and then; its worker then tells its dependents. Now
// and then it is cancelled while it runs instead: its record ends, its run goes on
// (run ends it later), and nobody tells its dependents until then.
func (s *releaseSim) runTask(name string) error {
	t, r := s.tasks[name], s.recs[name]
	if r.State != record.Queued {
		return fmt.Errorf("task %s runs with its record %s", name, r.State)
	}
	for _, p := range r.Parents {
		if !s.tasks[p].ended || s.tasks[p].goes {
			return fmt.Errorf("task %s runs before its parent %s ended", name, p)
		}
	}
	t.runs++
	end := *r
	end.Attempt++
	switch s.rng.IntN(10) {
	case 0:
		end.State = record.Dead
	case 1:
		end.State = record.Cancelled
	case 2:
		end.State, t.goes = record.Cancelled, true
	default:
		end.State = record.Done
	}
	s.put(&end)
	t.ended = true
	if !t.goes {
		s.tellers = append(s.tellers, &teller{parent: name, failed: end.State != record.Done, crashes: true})
	}
	return nil
}

// stepTeller takes one step of teller i: crash, or read a dependent, or write it.
func (s *releaseSim) stepTeller(i int) error {
	tl := s.tellers[i]
	deps := s.recs[tl.parent].Dependents
	if tl.crashes && s.rng.IntN(12) == 0 {
		// Its worker dies, and the cascades it runs with it: the message comes back,
		// and the next delivery tells all over again (the record is ended: it does
		// not run again).
		s.tellers = slices.DeleteFunc(s.tellers, func(o *teller) bool { return o.ownedBy(tl) })
		s.tellers = append(s.tellers, &teller{parent: tl.parent, failed: tl.failed, crashes: true})
		return nil
	}
	if tl.next == len(deps) {
		if slices.ContainsFunc(s.tellers, func(o *teller) bool { return o.owner == tl }) {
			return nil // waits for its cascades
		}
		s.tellers = slices.Delete(s.tellers, i, i+1) // told them all: acked, or the cascade is over
		return nil
	}
	dep := deps[tl.next]
	if tl.finish {
		// Finish what the write (this teller's, or an earlier one's) started, from
		// the record as it is now.
		cur, dt := s.recs[dep], s.tasks[dep]
		switch {
		case cur.State == record.Queued && cur.Attempt == 0 && !dt.ended:
			dt.queued = true // its message is published (again, maybe: one job all the same)
		case cur.State == record.Cancelled && cur.Attempt == 0:
			// Cancelled before any claim (for a failed parent, by this write or an
			// earlier teller's that died before it finished): its dependents are told,
			// in this teller's process. One cancelled after its claim (a parent's end
			// told twice finds it) is its own run's to tell.
			dt.ended = true
			s.tellers = append(s.tellers, &teller{parent: dep, failed: true, owner: tl})
		}
		tl.read, tl.finish = nil, false
		tl.next++
		return nil
	}
	if tl.read == nil {
		tl.read = s.recs[dep]
		return nil
	}
	next, changed := Tell(tl.read, Told{tl.parent: tl.failed}, s.now)
	if changed {
		if s.recs[dep].Revision != tl.read.Revision {
			tl.read = nil // conflict: read again
			return nil
		}
		s.put(&next)
		if next.State != record.Waiting {
			s.tasks[dep].released++
			if s.tasks[dep].released > 1 {
				return fmt.Errorf("task %s taken out of waiting twice", dep)
			}
			for _, p := range next.Parents {
				if !s.tasks[p].ended {
					return fmt.Errorf("task %s released before its parent %s ended", dep, p)
				}
				if s.tasks[p].goes {
					return fmt.Errorf("task %s released while the run of its parent %s, cancelled, goes on", dep, p)
				}
			}
		}
		if s.rng.IntN(6) == 0 {
			tl.read = nil // the reply was lost: read again and tell again
			return nil
		}
	}
	tl.finish = true
	return nil
}

// check checks the end state: every task ended, none waits, each ran at most once
// (no crash of a running task is modelled: that is the claim's part).
func (s *releaseSim) check() error {
	for _, name := range s.order {
		t, r := s.tasks[name], s.recs[name]
		switch {
		case !r.State.Terminal():
			return fmt.Errorf("task %s left %s (waiting for %v)", name, r.State, r.WaitingFor)
		case t.runs > 1:
			return fmt.Errorf("task %s ran %d times", name, t.runs)
		case r.State == record.Cancelled && t.runs == 0 && len(r.FailedParents) == 0 && len(r.Parents) > 0:
			return fmt.Errorf("task %s cancelled unrun without a failed parent", name)
		}
		failedParent := false
		for _, p := range r.Parents {
			failedParent = failedParent || s.recs[p].State != record.Done
		}
		if t.runs == 1 && failedParent && !r.RunIfFailed {
			return fmt.Errorf("task %s ran after a parent failed", name)
		}
	}
	return nil
}
