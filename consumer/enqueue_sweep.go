package consumer

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/workq/workq/internal/workflow"
)

// A producer that dies inside the enqueue of a sequence's job or of a workflow, after
// its records and before its messages, leaves jobs that no message in the queue
// stands for. Every worker sweeps for them (workflow.Releaser.Sweep): the job runs
// about a grace (workflow.EnqueueGrace) after its enqueue began, not at its key's next
// enqueue or never. Several workers sweeping at once publish the same messages, with
// the job id as their message id, and a claim lets one copy run.

// sweepEnqueues runs the sweep until ctx ends: every half grace (workflow.GraceOf
// ctx), with a jitter so
// that the workers of a queue do not sweep in step, and at once again while a sweep
// stopped short.
func (w *Worker) sweepEnqueues(ctx context.Context) {
	grace := workflow.GraceOf(ctx)
	for {
		wait := grace/2 + rand.N(grace/4+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		for more := true; more && ctx.Err() == nil; {
			more = w.sweepEnqueuesOnce(ctx, grace)
		}
	}
}

// sweepEnqueuesOnce runs one sweep and reports whether it stopped short with more to
// do; an error is logged, and the next sweep tries again.
func (w *Worker) sweepEnqueuesOnce(ctx context.Context, grace time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	now, err := w.records.Now(ctx)
	if err != nil {
		w.log.Debug("sweep of half-done enqueues: no server time", "err", err)
		return false
	}
	s, err := w.flows.Sweep(ctx, now, grace)
	if n := s.Sequences + s.Workflows + s.Removed; n > 0 {
		w.log.Info("swept enqueues their producers left half done",
			"sequence_jobs", s.Sequences, "workflows", s.Workflows, "workflows_removed", s.Removed)
	}
	if err != nil {
		w.log.Warn("sweep of half-done enqueues", "err", err)
		return false
	}
	return s.More
}
