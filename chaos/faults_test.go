//go:build chaos

package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// faults drives the faults of a run that goes by its share of work done (the
// workflow and sequence runs): the single server's SIGKILLs and the cluster's stream
// leaders' at given shares, one at a time, and a worker process's SIGKILL every
// killEvery, in turn over the pool's slots, meanwhile too. windows are the faults'
// time windows, for the check.
type faults struct {
	t          *testing.T
	js         jetstream.JetStream
	o          *observer
	wp         *workerPool
	nodes      []*natsNode
	streams    []string // whose leaders are killed, in turn
	start      time.Time
	serverAt   []float64 // shares of the work at which the single server is killed
	leaderAt   []float64 // … at which the cluster loses a stream leader
	workers    int
	killEvery  time.Duration
	nextKill   time.Time
	killSlot   int
	lk         *leaderKill // under way: the workers' kills go on meanwhile
	windows    []window
	kills      int
	serverKill int
	leaderKill int
}

// newFaults starts the clock of the workers' kills at start.
func newFaults(t *testing.T, js jetstream.JetStream, o *observer, wp *workerPool, nodes []*natsNode, streams []string,
	start time.Time, serverAt, leaderAt []float64, workers int, killEvery time.Duration) *faults {
	return &faults{t: t, js: js, o: o, wp: wp, nodes: nodes, streams: streams, start: start, serverAt: serverAt, leaderAt: leaderAt,
		workers: workers, killEvery: killEvery, nextKill: time.Now().Add(killEvery)}
}

// step takes the next step with share of the work done: a leader kill under way goes
// on, then at most one new fault starts. progress says how far the run is, for the
// log.
func (f *faults) step(share float64, progress string) {
	if f.lk != nil {
		if w, ok := f.lk.step(f.t, f.js, f.o); ok {
			f.windows, f.lk = append(f.windows, w), nil
		}
	}
	switch {
	case len(f.nodes) == 1 && f.serverKill < len(f.serverAt) && share >= f.serverAt[f.serverKill]:
		f.serverKill++
		f.windows = append(f.windows, restartServer(f.t, f.nodes[0], f.js, f.o, fmt.Sprintf("nats-server kill %d", f.serverKill), f.start, progress))
	case len(f.nodes) > 1 && f.lk == nil && f.leaderKill < len(f.leaderAt) && share >= f.leaderAt[f.leaderKill]:
		f.leaderKill++
		f.lk = startLeaderKill(f.t, f.js, f.nodes, f.streams, f.leaderKill, f.start, progress)
	case time.Now().After(f.nextKill):
		old, nw := f.wp.replace(f.killSlot)
		f.kills++
		f.t.Logf("%6.2fs SIGKILL %s, started %s (%s)", time.Since(f.start).Seconds(), old.name, nw.name, progress)
		f.killSlot = (f.killSlot + 1) % f.workers
		f.nextKill = time.Now().Add(f.killEvery)
	}
}

// leaderKilling reports whether a leader kill is under way: what the run reads back
// waits for the stream's leader meanwhile.
func (f *faults) leaderKilling() bool { return f.lk != nil }

// finish waits out a leader kill still under way (the work ended before the cluster
// was whole again) and returns the faults' windows.
func (f *faults) finish() []window {
	for f.lk != nil {
		if w, ok := f.lk.step(f.t, f.js, f.o); ok {
			f.windows, f.lk = append(f.windows, w), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return f.windows
}
