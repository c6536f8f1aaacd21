package sim

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/wireid"
)

// faults strikes the seed's faults during the first faultsFor, then makes sure two
// workers live and none is frozen.
func (w *world) faults(prod *client) {
	for time.Since(w.hist.start) < faultsFor {
		time.Sleep(w.between(500*time.Millisecond, 4*time.Second))
		live := w.live()
		w.remember()
		switch w.intn(9) {
		case 0: // a worker process dies; another starts a while later
			if len(live) > 0 {
				w.kill(live[w.intn(len(live))])
				time.Sleep(w.between(0, 2*time.Second))
				_, _ = w.startWorker()
			}
		case 1: // a worker freezes past its lease and thaws
			if len(live) > 0 {
				p := live[w.intn(len(live))]
				d := w.between(ackWait/2, 3*ackWait)
				w.hist.note("freeze %s for %v", p.name, d)
				p.cl.freeze()
				w.wg.Add(1)
				go func() {
					defer w.wg.Done()
					time.Sleep(d)
					p.cl.thaw()
					w.hist.note("thaw  %s", p.name)
				}()
			}
		case 2: // a connection resets, losing the replies on their way
			if w.intn(3) == 0 {
				w.hist.note("cut   producer")
				prod.cut()
			} else if len(live) > 0 {
				p := live[w.intn(len(live))]
				w.hist.note("cut   %s", p.name)
				p.cl.cut()
			}
		case 3: // the server is killed and restarts on what it had written
			down := w.between(0, time.Second)
			w.hist.note("crash server, down %v", down)
			if err := w.eng.crash(down); err != nil {
				w.hist.note("crash: %v", err)
			}
		case 4: // an operator deletes the workers' consumers; the workers make them again
			w.hist.note("delete the consumers")
			for _, level := range queue.Levels {
				_ = w.admin.DeleteConsumer(w.ctx, w.names.Stream, w.names.LevelConsumer(level))
			}
		case 5: // a copy of an earlier message comes back: the server forgot its ack, or its removal
			w.sendCopy()
		case 6: // an operator removes a job's message from the stream
			w.removeMessage(0)
		case 7: // a foreign client publishes a copy of a waiting task's message before its release
			w.sendWaitingCopy()
		default: // nothing
		}
	}
	for _, p := range w.workers {
		p.cl.thaw()
	}
	for len(w.live()) < 2 {
		_, _ = w.startWorker()
	}
}

// remember keeps a copy of one message in the jobs stream, for sendCopy.
func (w *world) remember() {
	ctx, cancel := context.WithTimeout(w.ctx, time.Second)
	defer cancel()
	s, seq, ok := w.randomMessage(ctx)
	if !ok {
		return
	}
	if m, err := s.GetMsg(ctx, seq); err == nil {
		w.copies = append(w.copies, m)
	}
}

// randomMessage is the jobs stream and a sequence between its first and last
// message (the message may be gone); false when the stream is empty or unread.
func (w *world) randomMessage(ctx context.Context) (jetstream.Stream, uint64, bool) {
	s, err := w.admin.Stream(ctx, w.names.Stream)
	if err != nil {
		return nil, 0, false
	}
	st := s.CachedInfo().State
	if st.Msgs == 0 {
		return nil, 0, false
	}
	return s, st.FirstSeq + uint64(w.intn(int(st.LastSeq-st.FirstSeq+1))), true
}

// sendCopy stores again a message remembered earlier (remember, capture).
func (w *world) sendCopy() {
	if len(w.copies) == 0 {
		return
	}
	w.resend(w.copies[w.intn(len(w.copies))])
}

// capture returns the message of job id in the stream now, nil if none.
func (w *world) capture(id string) *jetstream.RawStreamMsg {
	ctx, cancel := context.WithTimeout(w.ctx, time.Second)
	defer cancel()
	s, err := w.admin.Stream(ctx, w.names.Stream)
	if err != nil {
		return nil
	}
	m, err := s.GetLastMsgForSubject(ctx, w.names.JobSubject(id))
	if err != nil {
		return nil
	}
	return m
}

// resend stores m again as it was published (its enqueue and message id with it):
// what a server that forgot an ack, a removal and the message's id sends again.
// Within the duplicate window the server refuses it.
func (w *world) resend(m *jetstream.RawStreamMsg) {
	if m == nil {
		return
	}
	msg := nats.NewMsg(m.Subject)
	msg.Data = m.Data
	for k, v := range m.Header {
		if !strings.HasPrefix(k, "Nats-Expected") {
			msg.Header[k] = v
		}
	}
	ctx, cancel := context.WithTimeout(w.ctx, time.Second)
	defer cancel()
	if ack, err := w.admin.PublishMsg(ctx, msg); err == nil {
		w.hist.note("copy  of %s stored again: duplicate=%v", m.Subject, ack.Duplicate)
	}
}

// leftovers notes in the history what did not end: the records not terminal and the
// messages left in the stream.
func (w *world) leftovers(kv jetstream.KeyValue) {
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	for _, j := range w.jobs {
		if e, err := kv.Get(ctx, wireid.Encode(j.id)); err != nil {
			w.hist.note("left: %s has no record: %v", j.id, err)
		} else if r, err := record.Decode(j.id, e.Value(), e.Revision()); err != nil || !r.State.Terminal() {
			w.hist.note("left: %s record %v (%v)", j.id, r.State, err)
		}
	}
	s, err := w.admin.Stream(ctx, w.names.Stream)
	if err != nil {
		return
	}
	st := s.CachedInfo().State
	for seq := st.FirstSeq; st.Msgs > 0 && seq <= st.LastSeq; seq++ {
		if m, err := s.GetMsg(ctx, seq); err == nil {
			w.hist.note("left: message %d %s enqueue %s", seq, m.Subject, m.Header.Get(queue.HeaderEnqueue))
		}
	}
}

// removeMessage removes message seq (0: a random one) from the jobs stream, as an
// operator may; the job it carried need not end (its record may stay live for
// ever), unless enqueued again after.
func (w *world) removeMessage(seq uint64) {
	ctx, cancel := context.WithTimeout(w.ctx, time.Second)
	defer cancel()
	var s jetstream.Stream
	if seq == 0 {
		var ok bool
		if s, seq, ok = w.randomMessage(ctx); !ok {
			return
		}
	} else {
		var err error
		if s, err = w.admin.Stream(ctx, w.names.Stream); err != nil {
			return
		}
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return
	}
	id := w.names.JobID(m.Subject, m.Header.Get(queue.HeaderID), seq)
	if err := s.DeleteMsg(ctx, seq); err == nil {
		w.hist.note("remove message %d of %s", seq, id)
		w.mu.Lock()
		w.removed[id] = true
		w.mu.Unlock()
	}
}

// mayNotEnd reports whether an operator removed a message of j, or of a job j
// waits for (its workflow's tasks, its sequence's jobs): it may then never end.
func (w *world) mayNotEnd(j *plannedJob) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.removed {
		r := w.plan(id)
		if id == j.id || r.workflow != "" && r.workflow == j.workflow || r.sequence != "" && r.sequence == j.sequence {
			return true
		}
	}
	return false
}

// sendWaitingCopy publishes, as a foreign client could, the message a waiting
// workflow task keeps in its record, before the task is released.
func (w *world) sendWaitingCopy() {
	ctx, cancel := context.WithTimeout(w.ctx, time.Second)
	defer cancel()
	for _, j := range w.jobs {
		if len(j.parents) == 0 {
			continue
		}
		e, err := w.admin.KeyValue(ctx, w.names.Bucket)
		if err != nil {
			return
		}
		v, err := e.Get(ctx, wireid.Encode(j.id))
		if err != nil {
			continue
		}
		r, err := record.Decode(j.id, v.Value(), v.Revision())
		if err != nil || r.State != record.Waiting || r.Message == nil {
			continue
		}
		msg := nats.NewMsg(r.Message.Subject)
		msg.Data = r.Message.Data
		for k, vs := range r.Message.Header {
			msg.Header[k] = vs
		}
		if _, err := w.admin.PublishMsg(ctx, msg); err == nil {
			w.hist.note("copy  of waiting task %s published", j.id)
		}
		return
	}
}

// live is the workers not killed.
func (w *world) live() []*process {
	var out []*process
	for _, p := range w.workers {
		if !p.isDead() {
			out = append(out, p)
		}
	}
	return out
}
