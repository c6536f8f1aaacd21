package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/queue"
)

// A workers' consumer can be deleted and re-created under a running worker (an
// operator, a server that lost its state). Delivery counts then restart at 1, so the
// worker stamps every delivery with the incarnation of the consumer it was pulled
// through and fences on (incarnation, delivery count): see claim.go. A job's message
// is on one priority level's subject, so all its deliveries come through one
// consumer. These methods keep the worker's view of each level's incarnation and of
// its own health.

// incarnation is the incarnation of s's consumer that the worker knows now.
func (s *source) incarnation() queue.Incarnation { return *s.inc.Load() }

// setIncarnation records the incarnation of s's consumer and reports whether it is
// a new one: the consumer was re-created, and deliveries of the old one still
// buffered are to be dropped (the new consumer delivers their jobs again).
func (w *Worker) setIncarnation(s *source, inc queue.Incarnation) (changed bool) {
	old := s.inc.Swap(&inc)
	if old == nil || old.Epoch == inc.Epoch {
		return false
	}
	w.log.Warn("the workers' consumer was re-created; deliveries pulled through the old one are dropped and come again",
		"consumer", w.names.LevelConsumer(s.level), "first_seq", inc.FirstSeq)
	return true
}

// replaced reports whether l was pulled through a consumer that has since been
// replaced; such a delivery is dropped: no ack, no nak (they would reach the new
// consumer), no more progress reports.
func (w *Worker) replaced(l *lease) bool {
	if l.inc.Epoch >= l.src.incarnation().Epoch {
		return false
	}
	l.stop()
	w.stats.dropped.Add(1)
	return true
}

// checkIncarnation reads the incarnation of s's consumer from the server, and
// re-creates the consumer if it is gone. A new incarnation (another process
// re-created the consumer) is checked as a consumer the worker opens is, and an
// unusable consumer is checked again, until it is mended. It reports whether the
// incarnation changed.
func (w *Worker) checkIncarnation(ctx context.Context, s *source) (changed bool) {
	if s.unusable.Load() {
		return w.recover(ctx, s)
	}
	cctx, cancel := context.WithTimeout(ctx, max(w.cfg.heartbeat, time.Second)) // the check's own interval
	defer cancel()
	inc, err := queue.Refresh(cctx, w.objects, s.consumer)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return w.recover(ctx, s)
	case err != nil:
		w.log.Debug("reading the workers' consumer", "err", err)
		return false
	case inc.Epoch != s.incarnation().Epoch:
		return w.recover(ctx, s)
	}
	return false
}

// recover re-creates or re-reads and checks the workers' consumer. A consumer that
// cannot be had (an incompatible one took its place, say) leaves the worker unhealthy,
// with the reason logged as an error. An incompatible one is not pulled from (it would
// serve jobs on terms the workers cannot keep, and a pull that works would clear the
// worker's health) until a check finds it mended. It reports whether the incarnation
// changed.
func (w *Worker) recover(ctx context.Context, s *source) (changed bool) {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.ackWait)
	defer cancel()
	c, inc, err := w.ensureConsumer(cctx, s)
	if err != nil {
		if ctx.Err() == nil && !jserr.Transient(err) && cctx.Err() == nil {
			// Only a consumer that is there but wrong stops the level's pulls: other
			// failures (a server restarting, a closed connection) show in the pulls
			// themselves, which end the worker or mend it.
			s.unusable.Store(errors.Is(err, queue.ErrIncompatible))
			w.unhealthy(err, true)
		}
		return false
	}
	s.consumer = c
	s.unusable.Store(false)
	return w.setIncarnation(s, inc)
}

// pullFailed records a failed pull, unless a level's consumer is unusable: that
// reason stands until recover finds it mended, and a pull that was open on the
// consumer it replaced ends in an error of its own (no heartbeat) that says less.
func (w *Worker) pullFailed(err error) {
	for _, s := range w.sources {
		if s.unusable.Load() {
			return
		}
	}
	w.unhealthy(fmt.Errorf("pulling jobs: %w", err), false)
}

// unhealthy records why the worker cannot pull. The first failure of a streak, and
// every change of reason after it, is logged: a warning, or an error when the worker
// cannot repair it by itself (serious).
func (w *Worker) unhealthy(err error, serious bool) {
	prev := w.health.Swap(&err)
	if prev != nil && (*prev).Error() == err.Error() {
		return
	}
	if serious {
		w.log.Error("the worker cannot pull jobs; it keeps trying", "err", err)
		return
	}
	w.log.Warn("pulling jobs failed; checking the workers' consumer and retrying", "err", err)
}

// pullsWork records a pull that succeeded. While another level's consumer is
// unusable the worker stays unhealthy: its pulls working do not mend that one.
func (w *Worker) pullsWork() {
	for _, s := range w.sources {
		if s.unusable.Load() {
			return
		}
	}
	if prev := w.health.Swap(nil); prev != nil {
		w.log.Info("pulling jobs again", "after", (*prev).Error())
	}
}

// Health reports whether the worker can pull and claim jobs: nil while it can, else
// why not (the workers' consumer was deleted and cannot be re-created, the server is
// unreachable, the job records refuse the claims' writes, …). A worker repairs what
// it can by itself and keeps trying; Health is for health checks and alerts.
func (w *Worker) Health() error {
	if err := w.health.Load(); err != nil {
		return *err
	}
	if err := w.claims.Load(); err != nil {
		return *err
	}
	return nil
}
