package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/workq/workq/internal/queue"
)

// The pull buffer: the deliveries a worker holds beyond those its handlers run.
//
// Buffered deliveries are this worker's from the server's point of view: their
// AckWait runs and no other worker can take them. A shallow buffer keeps them young
// and shares jobs fairly between workers, but a worker with fast handlers then spends
// its time waiting on pull round trips. So, unless Prefetch fixes its size, the buffer
// follows the handlers: it holds about bufferedWork of work at the average time a
// handler slot spends per job (at most maxAutoPrefetch), and every buffered delivery
// reports progress to the server like a running one (its lease), so a buffer that a
// sudden slowdown leaves standing never times out.
//
// The buffer also holds at most about maxBufferedBytes of payload at the average job
// size seen, so that a queue of large jobs does not fill a worker's memory.
//
// The worker pulls with Fetch requests of its own, each asking for what the buffer
// lacks once a quarter of it is missing, so that the messages in the buffer are always
// ones the worker has seen and can keep alive. One pull is open at a time
// (maxFetches): the server shares the messages it has among open pulls in turn, so
// with two, deliveries would enter the buffer out of order, and one worker at
// Concurrency 1 would not run jobs in the order they were enqueued.
const (
	maxAutoPrefetch  = 512
	maxBufferedBytes = 32 << 20
	maxFetches       = 1
)

// bufferedWork is how much work the adaptive buffer holds: a tenth of AckWait, at
// most 50ms.
func bufferedWork(ackWait time.Duration) time.Duration { return min(ackWait/10, 50*time.Millisecond) }

// pullTimes returns the expiry of each pull request and the idle heartbeat the
// server sends on it.
//
// A worker that freezes (a long GC pause, a stalled link) still has pull requests
// open at the server. Were one still open when the frozen job's AckWait ran out, the
// server would redeliver the job into it, to the frozen worker again, and the job
// would wait a second AckWait. That AckWait runs out no sooner than AckWait minus the
// heartbeat interval after the worker froze, so pulls expire before that: within half
// of it, at most 1s (which also bounds how long a stopping worker waits for its open
// pulls), at least 50ms. The idle heartbeat is a quarter of the expiry, so a pull
// request the server no longer holds is noticed within half the expiry.
func pullTimes(ackWait, heartbeat time.Duration) (expiry, idle time.Duration) {
	expiry = min(max((ackWait-heartbeat)/2, 50*time.Millisecond), time.Second)
	return expiry, expiry / 4
}

// puller fills a worker's buffer of one priority level's deliveries.
type puller struct {
	w         *Worker
	src       *source
	buf       chan *lease
	held      atomic.Int64  // deliveries arrived and not finished: buffered or running
	wake      chan struct{} // a slot took a delivery or a fetch ended
	requested atomic.Int64  // asked for by open fetches, not yet arrived
	open      atomic.Int32  // fetches in progress
	perJob    atomic.Int64  // average slot time per job, ns; 0 until measured
	jobSize   atomic.Int64  // average job message size, bytes; 0 until measured
	fetches   sync.WaitGroup
	handing   sync.WaitGroup // hand-backs under way while stopping
	failed    chan error     // a fetch that failed: the consumer may need re-creating
	healthy   atomic.Bool    // a fetch ended well since the last look: reset the backoff
	stopping  atomic.Bool
	first     chan struct{}  // closed once the first pull has been answered (firstPulls)
	pulled    atomic.Bool    // the first pull was sent
	sweep     atomic.Bool    // sweep the consumer's orphans once pulls work (orphans.go)
	sweeping  atomic.Bool    // a sweep is under way
	sweeps    sync.WaitGroup // sweeps under way
}

func (w *Worker) newPuller(src *source) *puller {
	extra := maxAutoPrefetch
	if w.cfg.prefetch >= 0 {
		extra = w.cfg.prefetch
	}
	if src.level > queue.PriorityNormal {
		extra = max(extra, w.cfg.concurrency)
	}
	p := &puller{
		w: w, src: src, buf: make(chan *lease, w.cfg.concurrency+extra+1), wake: make(chan struct{}, 1),
		failed: make(chan error, maxFetches), first: make(chan struct{}),
	}
	p.sweep.Store(true) // at start, once the first pull works
	return p
}

// startSweep sweeps the consumer's orphans in the background, unless a sweep is under
// way already.
func (p *puller) startSweep(ctx context.Context) {
	if !p.sweeping.CompareAndSwap(false, true) {
		return
	}
	p.sweeps.Add(1)
	go func() {
		defer p.sweeps.Done()
		defer p.sweeping.Store(false)
		p.w.sweepOrphans(ctx, p.src)
	}()
}

// firstPulls waits, at most wait, until every level's first pull has been answered:
// a slot that took the first delivery to arrive could start a lower level's job while
// a higher level's jobs were still on their way.
func (w *Worker) firstPulls(ctx context.Context, wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for _, s := range w.sources {
		select {
		case <-s.puller.first:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// poke wakes the fetch loop.
func (p *puller) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// observe folds one job's slot time into the average the buffer is sized by.
func (p *puller) observe(d time.Duration) {
	average(&p.perJob, int64(d))
	p.poke()
}

// average folds v into the moving average avg (the first value as it is).
func average(avg *atomic.Int64, v int64) {
	for {
		old := avg.Load()
		next := v
		if old != 0 {
			next = old + (v-old)/8
		}
		if avg.CompareAndSwap(old, max(next, 1)) {
			return
		}
	}
}

// missing is how many more deliveries to pull now, 0 if none: what the worker holds
// and has asked for falls short of a delivery for every slot plus the extra depth,
// and either a slot would otherwise go without one or a quarter of the extra depth
// is missing (so that fast handlers pull in batches, not one by one). Under the
// queue's limits it holds no more than it may run (queueLimits.holding).
func (p *puller) missing() int {
	if most, limited := p.w.limits.holding(p.w.cfg.concurrency); limited {
		return max(most-int(p.held.Load()+p.requested.Load()), 0)
	}
	extra := p.extra()
	have := int(p.held.Load() + p.requested.Load())
	n := p.w.cfg.concurrency + extra - have
	if n >= 1 && (have < p.w.cfg.concurrency || n >= max(1, extra/4)) {
		return n
	}
	return 0
}

// extra is the buffer's depth beyond the idle slots: Prefetch if set; else none while
// the handlers' pace is unknown, then about bufferedWork of work at that pace, at most
// maxAutoPrefetch and about maxBufferedBytes of payload.
func (p *puller) extra() int {
	cfg := p.w.cfg
	if p.src.level > queue.PriorityNormal {
		// At least one waiting job of the level per slot, besides the running ones,
		// so that a slot that frees finds the next one here rather than taking a
		// lower level's while a pull brings it; as deep as the normal level's when
		// the pace calls for more.
		return max(p.extraAtPace(), cfg.concurrency)
	}
	return p.extraAtPace()
}

// extraAtPace is the buffer's depth beyond the idle slots by the option and the pace.
func (p *puller) extraAtPace() int {
	cfg := p.w.cfg
	if cfg.prefetch >= 0 {
		return cfg.prefetch
	}
	per := p.perJob.Load()
	if per == 0 {
		return 0
	}
	n := int64(cfg.concurrency) * int64(bufferedWork(cfg.ackWait)) / per
	if size := p.jobSize.Load(); size > 0 {
		n = min(n, maxBufferedBytes/size)
	}
	return int(min(max(n, 0), maxAutoPrefetch))
}

// accept checks a delivery taken from the buffer for a slot (Worker.take): one
// pulled through a consumer that has since been replaced is dropped (nil): the new
// consumer delivers the job again.
func (p *puller) accept(l *lease) *lease {
	if p.w.replaced(l) {
		p.held.Add(-1)
		p.poke()
		return nil
	}
	return l
}

// done tells the puller a slot finished its delivery after d.
func (p *puller) done(d time.Duration) {
	p.held.Add(-1)
	p.observe(d)
}

// fetch keeps the buffer filled until ctx ends. Then it stops pulling, hands back
// every buffered delivery and every one still arriving on open pulls (they expire
// within a second), and returns nil; it returns an error only if the connection is
// closed for good.
//
// A pull that fails (the consumer was deleted, by an operator or a server that lost
// its state; a leader change) makes it check the consumer, re-creating it if it is
// gone, and pull again after a short backoff; the worker is unhealthy (Health) until
// a pull succeeds again. Every heartbeat interval (at least a second) it also reads the
// consumer's incarnation, so that a consumer re-created by another worker is noticed even by a
// worker that had no pull open when it happened.
func (p *puller) fetch(ctx context.Context) error {
	w := p.w
	expiry, idle := pullTimes(w.cfg.ackWait, w.cfg.heartbeat)
	delay := 20 * time.Millisecond
	check := time.NewTicker(max(w.cfg.heartbeat, time.Second)) // one consumer info a second at most
	defer check.Stop()
	sweep := time.NewTicker(max(w.cfg.ackWait, time.Second)) // orphans.go: continually, not only after a failure
	defer sweep.Stop()
	defer p.stop()
	p.poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-p.failed:
			if w.js.Conn().IsClosed() {
				return fmt.Errorf("pull: %w", jetstream.ErrConnectionClosed)
			}
			w.pullFailed(err)
			p.sweep.Store(true) // once pulls work again: a restarted server may have left orphans
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(delay):
			}
			delay = min(2*delay, time.Second)
			if w.recover(ctx, p.src) {
				p.dropReplaced()
			}
			p.poke()
			continue
		case <-check.C:
			if w.checkIncarnation(ctx, p.src) {
				p.dropReplaced()
			}
			continue
		case <-p.src.recheck:
			if w.checkIncarnation(ctx, p.src) {
				p.dropReplaced()
			}
			continue
		case <-sweep.C:
			p.startSweep(ctx)
			continue
		case <-p.wake:
		}
		if p.healthy.Swap(false) {
			delay = 20 * time.Millisecond
			w.pullsWork()
			if p.sweep.Swap(false) {
				p.startSweep(ctx)
			}
		}
		if missing := p.missing(); missing > 0 && p.open.Load() < maxFetches && !p.src.unusable.Load() {
			if err := p.pull(ctx, missing, expiry, idle); err != nil {
				if w.js.Conn().IsClosed() {
					return fmt.Errorf("pull: %w", jetstream.ErrConnectionClosed)
				}
				p.report(err)
			}
		}
	}
}

// dropReplaced drops the buffered deliveries of a replaced consumer now, rather than
// when a slot comes to them: until then their progress reports would keep the new
// consumer's deliveries of the same jobs from moving on.
func (p *puller) dropReplaced() {
	var keep []*lease
	for done := false; !done; {
		select {
		case l := <-p.buf:
			if p.w.replaced(l) {
				p.held.Add(-1)
			} else {
				keep = append(keep, l)
			}
		default:
			done = true
		}
	}
	for _, l := range keep {
		p.buf <- l
	}
	p.poke()
}

// report hands a failed pull to the fetch loop, unless one is already waiting there.
func (p *puller) report(err error) {
	select {
	case p.failed <- err:
	default:
	}
}

// pull sends one Fetch for n deliveries and moves what arrives into the buffer, each
// with its lease. The first is a no-wait pull, answered at once with what the level
// has, so that a starting worker knows every level's waiting jobs before its slots
// take one (firstPulls). A worker told to stop quickly (internal/quickstop) ends its
// pull when ctx ends, instead of letting it expire.
func (p *puller) pull(ctx context.Context, n int, expiry, idle time.Duration) error {
	inc := p.src.incarnation()
	first := !p.pulled.Swap(true)
	var batch jetstream.MessageBatch
	var err error
	endPull := func() {}
	switch {
	case first:
		batch, err = p.src.consumer.FetchNoWait(n)
	case p.w.quick:
		// FetchContext asks the server for nine tenths of the time left: expiry.
		var pctx context.Context
		pctx, endPull = context.WithTimeout(ctx, expiry+expiry/9)
		batch, err = p.src.consumer.Fetch(n, jetstream.FetchContext(pctx), jetstream.FetchHeartbeat(idle))
	default:
		batch, err = p.src.consumer.Fetch(n, jetstream.FetchMaxWait(expiry), jetstream.FetchHeartbeat(idle))
	}
	if err != nil {
		endPull()
		if first {
			close(p.first) // no answer to wait for
		}
		return err
	}
	p.requested.Add(int64(n))
	p.open.Add(1)
	p.fetches.Add(1)
	go func() {
		defer p.fetches.Done()
		defer endPull()
		got := 0
		for msg := range batch.Messages() {
			got++
			p.held.Add(1) // before requested drops, so the two never undercount
			p.requested.Add(-1)
			if p.w.cfg.prefetch < 0 {
				average(&p.jobSize, int64(len(msg.Data())))
			}
			l := p.w.newLease(msg, p.src, inc)
			if p.stopping.Load() {
				p.handBack(l) // stopping: never started
				continue
			}
			p.buf <- l
		}
		p.requested.Add(int64(got - n))
		p.open.Add(-1)
		if first {
			close(p.first)
		}
		err := batch.Error()
		if p.w.quick && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			err = nil // the pull's own end, not a failure
		}
		if err != nil {
			p.report(err)
		} else {
			p.healthy.Store(true)
		}
		p.poke()
	}()
	return nil
}

// handBack gives back a delivery that never started, in the background while the
// puller stops.
func (p *puller) handBack(l *lease) {
	p.handing.Add(1)
	go func() {
		defer p.handing.Done()
		p.w.handBack(l)
	}()
}

// stop ends pulling: deliveries still arriving on open pulls are handed back, and so
// is everything in the buffer once they have ended.
func (p *puller) stop() {
	p.stopping.Store(true)
	p.fetches.Wait()
	p.sweeps.Wait()
	for done := false; !done; {
		select {
		case l := <-p.buf:
			if !p.w.replaced(l) {
				p.handBack(l)
			}
		default:
			done = true
		}
	}
	p.handing.Wait()
}
