package consumer

import "sync"

// held maps the stream sequences of the deliveries a worker holds (buffered or
// running, their leases live), and of those it finished lately, to their leases.
//
// The server can deliver a message again that this worker holds or has just
// finished: a single-replica server keeps its consumers' delivery and ack state in
// memory and writes it out about ten times a second whatever its fsync setting, so a
// server killed and restarted may have forgotten recent deliveries, and acks that
// had not yet removed their job, and send those jobs out again as first deliveries.
// A first delivery that is provably current runs without reading the record (a lazy
// first claim), so each such twin would run its job a second time:
//
//   - A twin of a delivery still held is dropped: the server matches progress reports
//     and acks by stream sequence, so the first delivery's lease keeps the twin's
//     pending entry alive and its ack settles it. The job runs once.
//   - A twin of one of the last finishedKept deliveries the worker finished reads the
//     record before it runs, like any delivery that cannot prove it is current: the
//     record of a job that was committed says done, and the twin is acked without
//     running. The history is counted in deliveries, not time, so it does not age
//     while the worker waits out a server restart of any length.
type held struct {
	mu       sync.Mutex
	m        map[uint64]*lease
	finished map[uint64]struct{} // the sequences of the ring
	ring     []uint64            // the last finishedKept finished sequences, oldest at next
	next     int
}

// finishedKept is how many finished deliveries a worker remembers: more than the
// deliveries of the second or so before a crash that a restarted server may send out
// again, at tens of thousands of jobs a second, for about 1 MiB.
const finishedKept = 1 << 15

// holding is what hold says of a new delivery.
type holding int

const (
	fresh        holding = iota // no other delivery of the message is known
	twinOfLive                  // a live lease holds the message: leave it to that one
	twinOfRecent                // a lease of the message ended lately: read the record first
)

// hold registers l as the holder of stream sequence seq, unless a live lease of the
// same consumer incarnation holds it already.
func (h *held) hold(seq uint64, l *lease) holding {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.m[seq]; old != nil && old != l && old.inc.Epoch == l.inc.Epoch && !old.stopped.Load() {
		return twinOfLive
	}
	if h.m == nil {
		h.m, h.finished = map[uint64]*lease{}, map[uint64]struct{}{}
	}
	h.m[seq] = l
	l.seq = seq
	if _, ok := h.finished[seq]; ok {
		return twinOfRecent
	}
	return fresh
}

// release forgets l as the holder of its sequence and adds the sequence to the
// finished ring, pushing out the oldest when the ring is full.
func (h *held) release(l *lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m[l.seq] != l {
		return
	}
	delete(h.m, l.seq)
	if _, ok := h.finished[l.seq]; ok {
		return
	}
	if len(h.ring) < finishedKept {
		h.ring = append(h.ring, l.seq)
	} else {
		delete(h.finished, h.ring[h.next])
		h.ring[h.next] = l.seq
		h.next = (h.next + 1) % finishedKept
	}
	h.finished[l.seq] = struct{}{}
}
