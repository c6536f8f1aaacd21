package ui

import (
	"context"
	"time"

	"github.com/workq/workq/producer"
)

// sample reads every queue's state into the history now and then every interval,
// until ctx ends (Handler.Close), so that the charts have points for the time no
// page was open. It reads through the pages' shared snapshot: a page served within
// half an interval costs the server no second reading. A failing reading is logged
// once, when the failures start, and once more when they end.
func (h *handler) sample(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(h.cfg.sampleEvery)
	defer tick.Stop()
	failing := false
	for {
		err := h.sampleOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			h.cfg.logger.Warn("ui: sampling the queues for the charts failed; trying again every interval", "every", h.cfg.sampleEvery, "err", err)
		case err == nil && failing:
			h.cfg.logger.Info("ui: sampling the queues works again")
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sampleOnce adds one reading of every queue to the history and forgets the
// queues that are gone.
func (h *handler) sampleOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.timeout)
	defer cancel()
	qs, at, err := h.snap.within(ctx, h.adm, min(h.snap.ttl, h.cfg.sampleEvery/2))
	if err != nil {
		return err
	}
	live := make(map[string]bool, len(qs))
	for _, q := range qs {
		live[q.Name] = true
		// The failed attempts since the last reading, from the records written since
		// (the index admin keeps: its first reading of a queue reads every record).
		// Without it this reading has no failures to show.
		var tally *producer.JobTally
		if t, err := h.adm.JobTally(ctx, q.Name); err == nil {
			tally = &t
		}
		h.hist.observe(q, at, tally)
	}
	h.hist.forget(live)
	return nil
}
