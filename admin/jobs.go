package admin

import (
	"context"

	"github.com/workq/workq/producer"
)

// Record is a job's record: the producer's, the JSON document of the queue's job
// records bucket (see docs/wire-format.md, "Job record").
type Record = producer.Record

// Job returns the record of job id on queue name: its state (scheduled, queued,
// running, retrying, done, dead or cancelled), attempts, worker, timings, last error
// and result. An unknown id is ErrNotFound. It is producer.Status, without creating
// the queue.
func (a *Admin) Job(ctx context.Context, name, id string) (*Record, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.Status(ctx, id)
}

// CancelJob cancels job id on queue name wherever it stands — scheduled, queued,
// retrying or running — and returns its record, which says cancelled: it never runs
// (again), a running handler's context ends with consumer.ErrCancelled at its
// worker's next heartbeat, and nothing is committed or retried. A finished job is
// ErrFinished, an unknown id ErrNotFound. It is producer.Cancel, without creating
// the queue.
func (a *Admin) CancelJob(ctx context.Context, name, id string) (*Record, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.Cancel(ctx, id)
}

// WaitJob waits until job id on queue name has ended and returns its final record:
// done, dead or cancelled. It is producer.Wait (a watch of the job's record, no
// polling), without creating the queue: an unknown id is ErrNotFound at once.
func (a *Admin) WaitJob(ctx context.Context, name, id string) (*Record, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx, id)
}
