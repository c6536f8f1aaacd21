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
// in the buffer and running, and, while a fenced run goes, a check of its claim beside
// each report (off the timer, so a slow read never delays the report).
//
// It also knows what the worker can prove about the delivery without asking the
// server: the pull that brought it was sent at anchor, so the server delivered it
// later and cannot redeliver it before anchor + AckWait; and inc is the consumer
// incarnation that was current when the pull was sent.
type lease struct {
	w      *Worker
	msg    jetstream.Msg
	anchor time.Time
	src    *source // the priority level's consumer it came through
	inc    queue.Incarnation

	mu    sync.Mutex
	t     *time.Timer
	check func() // the claim check of a running fenced job; nil otherwise

	checking atomic.Bool // a claim check is under way
	stopped  atomic.Bool // stop was called (set under mu, readable without it)
	seq      uint64      // the stream sequence it holds in the worker's held set; 0 before
}

// newLease starts the progress reports of msg, which a pull through src sent at
// anchor brought while inc was src's consumer's incarnation.
func (w *Worker) newLease(msg jetstream.Msg, anchor time.Time, src *source, inc queue.Incarnation) *lease {
	l := &lease{w: w, msg: msg, anchor: anchor, src: src, inc: inc}
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

// current reports whether the delivery is provably still this worker's: the server
// cannot have handed it to another worker yet, because AckWait has not passed since
// the pull that brought it was sent (less a heartbeat interval of margin for the
// decision to take effect). A delivery that is not provably current reads the job
// record before it runs.
func (l *lease) current() bool {
	return time.Since(l.anchor) < l.w.cfg.ackWait-l.w.cfg.heartbeat
}

// watch sets the claim check run beside each progress report; nil stops checking.
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
	if l.seq != 0 {
		l.w.held.release(l)
	}
}
