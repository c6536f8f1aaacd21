package queue

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// WorkersState is the state of a queue's workers' consumers, one per priority level
// (LevelConsumer), summed: what an operator calls the queue's pending and running
// jobs.
type WorkersState struct {
	// Consumers are the levels' consumers that exist, highest level first; none
	// before a worker has run.
	Consumers []*jetstream.ConsumerInfo
	// Pending, AckPending, Redelivered and Waiting are the consumers' sums.
	Pending                          uint64
	AckPending, Redelivered, Waiting int
	// Delivered is the highest stream sequence any of them delivered; MinDelivered
	// the lowest of their last delivered sequences.
	Delivered, MinDelivered uint64
	// Paused: every one of them is paused.
	Paused bool
}

// Normal is the normal level's consumer (the one every queue has once a worker ran),
// nil if it does not exist.
func (w WorkersState) Normal(n Names) *jetstream.ConsumerInfo {
	for _, ci := range w.Consumers {
		if ci.Name == n.Consumer {
			return ci
		}
	}
	return nil
}

// ReadWorkers reads the state of the workers' consumers of the queue's stream s, in
// one listing of its consumers.
func ReadWorkers(ctx context.Context, s jetstream.Stream, n Names) (WorkersState, error) {
	byName := map[string]*jetstream.ConsumerInfo{}
	l := s.ListConsumers(ctx)
	for ci := range l.Info() {
		byName[ci.Name] = ci
	}
	if err := l.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return WorkersState{}, err
	}
	var w WorkersState
	w.Paused = true
	for _, p := range Levels {
		ci := byName[n.LevelConsumer(p)]
		if ci == nil {
			continue
		}
		w.Consumers = append(w.Consumers, ci)
		w.Pending += ci.NumPending
		w.AckPending += ci.NumAckPending
		w.Redelivered += ci.NumRedelivered
		w.Waiting += ci.NumWaiting
		w.Delivered = max(w.Delivered, ci.Delivered.Stream)
		if len(w.Consumers) == 1 || ci.Delivered.Stream < w.MinDelivered {
			w.MinDelivered = ci.Delivered.Stream
		}
		w.Paused = w.Paused && ci.Paused
	}
	w.Paused = w.Paused && len(w.Consumers) > 0
	return w, nil
}
