package protocol

// The engine beneath the simulation: the stream, the workers' consumer, the records
// bucket, and a server that crashes and comes back with what it flushed.

import (
	"time"
)

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
	next.Revision, next.WrittenAt = s.revision, time.Time{}.Add(s.now)
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
