package consumer

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
)

// lease keeps one delivery alive from its arrival in the pull buffer to its end: a
// progress report (InProgress) every heartbeat interval, with no gap between waiting
// in the buffer and running, and, while a run goes, a check beside each report (off
// the timer, so a slow write never delays the report): a fenced run's renewal of its
// claim, an unfenced run's look for a cancel. inc is the consumer incarnation that was
// current when the pull that brought it was sent.
type lease struct {
	w   *Worker
	msg jetstream.Msg
	src *source // the priority level's consumer it came through
	inc queue.Incarnation

	mu    sync.Mutex
	t     *time.Timer
	check func() // the check of a running job; nil otherwise

	checking atomic.Bool // a check is under way
	stopped  atomic.Bool // stop was called (set under mu, readable without it)
}

// newLease starts the progress reports of msg, which a pull through src brought
// while inc was src's consumer's incarnation.
func (w *Worker) newLease(msg jetstream.Msg, src *source, inc queue.Incarnation) *lease {
	l := &lease{w: w, msg: msg, src: src, inc: inc}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t = time.AfterFunc(w.cfg.heartbeat, l.beat)
	return l
}

// beat reports progress, starts a claim check if a run asked for one and none is
// under way, and schedules the next beat.
func (l *lease) beat() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped.Load() {
		return
	}
	if err := l.msg.InProgress(); err == nil {
		l.w.stats.heartbeats.Add(1)
		l.w.metrics.heartbeats.Inc()
	}
	if check := l.check; check != nil && l.checking.CompareAndSwap(false, true) {
		go func() {
			defer l.checking.Store(false)
			check()
		}()
	}
	l.t.Reset(l.w.cfg.heartbeat)
}

// watch sets the check run beside each progress report; nil stops checking.
func (l *lease) watch(check func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.check = check
}

// stop ends the progress reports: the delivery is acked, handed back, dropped or
// was found to belong to another worker.
func (l *lease) stop() {
	l.mu.Lock()
	l.stopped.Store(true)
	l.check = nil
	l.t.Stop()
	l.mu.Unlock()
}

// msgAction is what becomes of a delivery's message as the delivery ends.
type msgAction int

const (
	msgLeave msgAction = iota // nothing: the job is another run's, or it comes back after AckWait
	msgAck                    // removed from the queue: its record says the job ended, or an unfenced run succeeded
	msgNak                    // put back, to be delivered again after a delay
	msgTerm                   // removed for good: dead (its dead letter out) or cancelled
)

var msgActionNames = [...]string{"leave", "ack", "nak", "term"}

func (a msgAction) String() string { return msgActionNames[a] }

// settle stops the progress reports and then acks, naks with delay or terminates the
// message, or leaves it, as a says. It is the only place a delivery's message is
// acked, put back or terminated. None waits for the server's reply: the job record is
// the truth, and a reply that is lost only brings the job back after AckWait, when its
// record decides (waiting would cost a round trip per job, on a server that fsyncs
// each write the fsync of the job's removal). The reports stop first: one after a nak
// would move the redelivery to AckWait from then.
func (l *lease) settle(a msgAction, delay time.Duration) error {
	l.stop()
	switch a {
	case msgAck:
		return l.msg.Ack()
	case msgNak:
		return l.msg.NakWithDelay(delay)
	case msgTerm:
		return l.msg.Term()
	}
	return nil
}
