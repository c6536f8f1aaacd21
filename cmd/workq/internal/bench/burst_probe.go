package bench

import (
	"context"
	"time"
)

// probeEvery is how often a burst's probe enqueues a job.
const probeEvery = 10 * time.Millisecond

// probe enqueues a job every probeEvery (or as soon as the last one is acknowledged,
// if that took longer) until stopped, and keeps the slowest acknowledgement of those
// that arrived before split and of those that arrived after it. Stopped after split,
// it has at least one acknowledgement after split.
type probe struct {
	quit chan struct{}
	done chan struct{}

	before, after time.Duration
	err           error
}

func startProbe(ctx context.Context, send func(context.Context) error, split time.Time) *probe {
	p := &probe{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(probeEvery)
		defer t.Stop()
		for {
			sent := time.Now()
			if err := send(ctx); err != nil {
				p.err = err
				return
			}
			acked := time.Now()
			if took := acked.Sub(sent); acked.Before(split) {
				p.before = max(p.before, took)
			} else {
				p.after = max(p.after, took)
			}
			select {
			case <-p.quit:
				if p.after > 0 || time.Now().Before(split) {
					return
				}
				// Stopped after split with no sample there yet: take one.
			case <-t.C:
			}
		}
	}()
	return p
}

// stop stops the probe once its enqueue under way is acknowledged, and returns the
// slowest acknowledgements before and after split, and the error that stopped it
// early, if one did.
func (p *probe) stop() (before, after time.Duration, err error) {
	close(p.quit)
	<-p.done
	return p.before, p.after, p.err
}
