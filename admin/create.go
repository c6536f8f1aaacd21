package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
)

// Defaults of CreateQueue, the same as a worker's (consumer.DefaultAckWait and
// consumer.DefaultMaxAckPending), so that workers left at their defaults find the
// consumers as they would have made them.
const (
	DefaultAckWait       = 30 * time.Second
	DefaultMaxAckPending = 1000
)

// QueueOptions are what CreateQueue makes a queue with; zero values take the
// defaults a producer or worker creating the queue would.
type QueueOptions struct {
	// AckWait is the workers' AckWait: how long a job may go without a heartbeat
	// before it moves to another worker. Workers must ask for the same (or leave
	// theirs at the default when this is too). Default DefaultAckWait, 30s.
	AckWait time.Duration
	// MaxAckPending caps the jobs the workers hold at once, across all of them.
	// Default DefaultMaxAckPending, 1000.
	MaxAckPending int
	// Replicas of the queue's streams and buckets: 1 (the default) on a single
	// server, 3 on a cluster.
	Replicas int
	// Duplicates is the window in which a job id enqueued again is dropped. Default
	// 2 minutes.
	Duplicates time.Duration
	// RecordTTL is how long a job record lives after its last write. Default 24h.
	RecordTTL time.Duration
}

// CreateQueue creates queue name with every object its producers and workers use:
// the jobs and dead-letter streams, the job records and unique-key buckets, and the
// workers' consumer of each priority level. It is idempotent: objects that exist are
// checked, as a worker checks them, and kept. It is how an operator provisions a
// queue for producers and workers whose users may not create streams or consumers
// (see package perms).
func (a *Admin) CreateQueue(ctx context.Context, name string, o QueueOptions) (*QueueInfo, error) {
	n, err := names(ctx, name)
	if err != nil {
		return nil, err
	}
	switch {
	case o.AckWait == 0:
		o.AckWait = DefaultAckWait
	case o.AckWait < 100*time.Millisecond:
		return nil, fmt.Errorf("admin: create queue %s: %w", name, option.Invalid("AckWait", o.AckWait, "at least 100ms"))
	}
	if o.MaxAckPending == 0 {
		o.MaxAckPending = DefaultMaxAckPending
	} else if o.MaxAckPending < 0 {
		return nil, fmt.Errorf("admin: create queue %s: %w", name, option.Invalid("MaxAckPending", o.MaxAckPending, "at least 1"))
	}
	objs, err := queue.Provision(ctx, a.js, n, queue.Config{Replicas: o.Replicas, Duplicates: o.Duplicates, RecordTTL: o.RecordTTL})
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	if _, err := queue.OpenUniques(ctx, a.js, objs); err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	replicas := objs.Stream.CachedInfo().Config.Replicas
	for _, level := range queue.Levels {
		cfg := queue.LevelConsumerConfig(n, level, o.AckWait, o.MaxAckPending, replicas)
		if _, _, err := queue.EnsureWorkers(ctx, objs, cfg); err != nil {
			return nil, fmt.Errorf("admin: queue %s: %w", name, err)
		}
	}
	a.forget(name)
	return a.Queue(ctx, name)
}
