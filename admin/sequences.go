package admin

import (
	"context"

	"github.com/workq/workq/producer"
)

// SequenceInfo is where one sequence key stands (the producer's): its active job,
// how many wait behind it and since when, and the job it halted at.
type SequenceInfo = producer.SequenceInfo

// ErrNotHalted is returned by ResumeSequence for a key no job of which is halted.
var ErrNotHalted = producer.ErrNotHalted

// Sequences lists the sequence keys of queue name that have jobs not ended, by key.
// It reads every job record of the queue, as Jobs does. It is producer.Sequences,
// without creating the queue.
func (a *Admin) Sequences(ctx context.Context, name string) ([]SequenceInfo, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.Sequences(ctx)
}

// Sequence returns where sequence key of queue name stands, with its jobs that have
// not ended in their order. It is producer.SequenceStatus, without creating the
// queue.
func (a *Admin) Sequence(ctx context.Context, name, key string) (*SequenceInfo, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.SequenceStatus(ctx, key)
}

// ResumeSequence resumes sequence key of queue name, halted at a job whose
// predecessor died: that job runs, and the key goes on. ErrNotHalted when no job of
// the key is halted. It is producer.ResumeSequence, without creating the queue.
func (a *Admin) ResumeSequence(ctx context.Context, name, key string) (*Record, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.ResumeSequence(ctx, key)
}
