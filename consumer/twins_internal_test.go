package consumer

import (
	"testing"

	"github.com/workq/workq/internal/queue"
)

// The held set tells a twin of a live delivery from one of a finished delivery, and
// remembers the last finishedKept finished ones, no more.
func TestHeldTwins(t *testing.T) {
	t.Parallel()
	w := &Worker{}
	lease := func(epoch int64) *lease { return &lease{w: w, inc: queue.Incarnation{Epoch: epoch}} }
	a := lease(1)
	if got := w.held.hold(7, a); got != fresh {
		t.Fatalf("first delivery: %v, want fresh", got)
	}
	if got := w.held.hold(7, lease(1)); got != twinOfLive {
		t.Fatalf("second delivery while the first is live: %v, want twinOfLive", got)
	}
	if got := w.held.hold(7, lease(2)); got != fresh {
		t.Fatalf("delivery from a new consumer incarnation: %v, want fresh (the old lease's acks go nowhere)", got)
	}
	finish := func(seq uint64) {
		l := lease(2)
		w.held.hold(seq, l)
		l.stopped.Store(true)
		w.held.release(l)
	}
	finish(8)
	c := lease(2)
	if got := w.held.hold(8, c); got != twinOfRecent {
		t.Fatalf("delivery of a finished one: %v, want twinOfRecent", got)
	}
	c.stopped.Store(true)
	w.held.release(c) // finished again: still one entry
	for seq := uint64(100); seq < 100+finishedKept; seq++ {
		finish(seq)
	}
	if len(w.held.finished) != finishedKept || len(w.held.ring) != finishedKept {
		t.Fatalf("remembers %d finished (ring %d), want %d", len(w.held.finished), len(w.held.ring), finishedKept)
	}
	if got := w.held.hold(101, lease(2)); got != twinOfRecent {
		t.Fatalf("a delivery among the last %d finished: %v, want twinOfRecent", finishedKept, got)
	}
	if got := w.held.hold(8, lease(2)); got != fresh {
		t.Fatalf("a delivery finished before the last %d: %v, want fresh (forgotten)", finishedKept, got)
	}
}
