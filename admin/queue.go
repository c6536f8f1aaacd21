package admin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/workflow"
)

// QueueInfo is a queue's state as the server reports it.
type QueueInfo struct {
	Name            string    `json:"name"`
	Stream          string    `json:"stream"`
	Jobs            uint64    `json:"jobs"`                       // jobs in the stream: queued, running or retrying
	Scheduled       uint64    `json:"scheduled"`                  // delayed jobs waiting for their time (in the stream too)
	Schedules       uint64    `json:"schedules"`                  // periodic schedules (in the stream too)
	Bytes           uint64    `json:"bytes"`                      // the size of the stream's messages
	Pending         uint64    `json:"pending"`                    // not yet delivered to a worker (all the jobs without a consumer)
	AckPending      int       `json:"ack_pending"`                // delivered and not yet acknowledged: Running + Retrying
	Running         int       `json:"running"`                    // of those, not waiting out a retry: running, or held in a worker's pull buffer
	Retrying        int       `json:"retrying"`                   // of those, waiting out a retry backoff (record state retrying)
	RetryingPartial bool      `json:"retrying_partial,omitempty"` // more than RetryingScanLimit were delivered: Retrying counts among the first ones only
	Redelivered     int       `json:"redelivered"`                // delivered and not acknowledged, and delivered more than once
	Waiting         int       `json:"waiting"`                    // pull requests from workers waiting for jobs
	Dead            uint64    `json:"dead"`                       // dead letters
	Records         uint64    `json:"records"`                    // job records in the bucket (live and markers)
	Workers         bool      `json:"workers"`                    // the workers' consumer exists
	Paused          bool      `json:"paused"`                     // PauseQueue: workers get no jobs until ResumeQueue
	Limits          Limits    `json:"limits,omitzero"`            // SetLimits: how many jobs may run at once and start per window
	AckWait         Duration  `json:"ack_wait"`                   // the workers' AckWait, 0 without a consumer
	Duplicates      Duration  `json:"duplicates"`                 // the dedup window for job ids
	RecordTTL       Duration  `json:"record_ttl"`                 // how long job records live
	Replicas        int       `json:"replicas"`
	Storage         string    `json:"storage"`
	Created         time.Time `json:"created"`
	FirstJob        time.Time `json:"first_job,omitzero"` // when the oldest job was stored
	// SequenceWaiting counts the jobs waiting for the job before them in their
	// sequence key (docs/sequences.md), SequenceKeys the keys with such a job, and
	// SequenceOldest is when the longest waiting of them was enqueued. They come from
	// the server's index of the sequences' links and the records of the jobs they
	// wait for, not from a read of every record;
	// a job halted after a dead one is not counted (Admin.Sequences lists it).
	SequenceWaiting int       `json:"sequence_waiting"`
	SequenceKeys    int       `json:"sequence_keys"`
	SequenceOldest  time.Time `json:"sequence_oldest,omitzero"`
	// LastSequence is the stream's last sequence: it grows by one with every job
	// stored (enqueued, fired or requeued) and every schedule written, so its
	// difference over time is the queue's arrival rate.
	LastSequence uint64 `json:"last_sequence"`
}

// Queues returns the info of every workq queue on the server, by name.
func (a *Admin) Queues(ctx context.Context) ([]QueueInfo, error) {
	if ctx == nil {
		return nil, fmt.Errorf("admin: list queues: %w", option.Nil("context"))
	}
	var names []string
	err := a.eachStream(ctx, "workq.*.jobs", func() { names = names[:0] }, func(si *jetstream.StreamInfo) {
		q, ok := strings.CutPrefix(si.Config.Name, "WORKQ_")
		if !ok {
			return
		}
		if n, err := queue.NamesFor(q); err != nil || n.Stream != si.Config.Name || !contains(si.Config.Subjects, n.JobsSubject) {
			return
		}
		names = append(names, q)
	})
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	sort.Strings(names)
	out := make([]QueueInfo, 0, len(names))
	for _, q := range names {
		info, err := a.Queue(ctx, q)
		if errors.Is(err, ErrNoQueue) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *info)
	}
	return out, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Queue returns the state of queue name, or an error wrapping ErrNoQueue. A queue
// deleted while its state is read is ErrNoQueue too, whichever read meets it gone.
func (a *Admin) Queue(ctx context.Context, name string) (*QueueInfo, error) {
	n, err := names(ctx, name)
	if err != nil {
		return nil, err
	}
	s, err := a.jobsStream(ctx, n)
	if err != nil {
		return nil, err
	}
	qi, err := a.queueState(ctx, n, s)
	if err != nil {
		if _, serr := a.js.Stream(ctx, n.Stream); errors.Is(serr, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("queue %s: %w (deleted while it was read)", n.Queue, ErrNoQueue)
		}
		return nil, err
	}
	return qi, nil
}

// queueState reads the state of queue n, whose jobs stream is s.
func (a *Admin) queueState(ctx context.Context, n queue.Names, s jetstream.Stream) (*QueueInfo, error) {
	si := s.CachedInfo()
	limits, err := queue.LimitsOf(si.Config)
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", n.Queue, err)
	}
	qi := &QueueInfo{
		Limits: limitsOf(limits),
		Name:   n.Queue, Stream: n.Stream, Bytes: si.State.Bytes,
		Duplicates: Duration(si.Config.Duplicates), Replicas: si.Config.Replicas, Storage: si.Config.Storage.String(),
		Created: si.Created, LastSequence: si.State.LastSeq,
	}
	var ws queue.WorkersState
	err = retry.Do(ctx, func(ctx context.Context) error {
		ws, err = queue.ReadWorkers(ctx, s, n)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("queue %s: workers' consumers: %w", n.Queue, err)
	}
	if ci := ws.Normal(n); ci != nil {
		qi.Workers, qi.AckWait = true, Duration(ci.Config.AckWait)
	}
	qi.Paused = ws.Paused
	qi.Pending, qi.AckPending, qi.Redelivered, qi.Waiting = ws.Pending, ws.AckPending, ws.Redelivered, ws.Waiting
	qi.Running = ws.AckPending
	census, err := queue.TakeCensus(ctx, s, n, si, ws)
	if err != nil {
		return nil, fmt.Errorf("queue %s: count jobs and schedules: %w", n.Queue, err)
	}
	qi.Jobs, qi.Scheduled, qi.Schedules, qi.FirstJob = census.Jobs, census.Scheduled, census.Schedules, census.Oldest
	if len(ws.Consumers) < len(queue.Levels) {
		qi.Pending = census.Jobs - min(census.Jobs, uint64(ws.AckPending)) // the levels without a consumer: all pending
	}
	if qi.AckPending > 0 {
		qi.Retrying, qi.RetryingPartial, err = countRetrying(ctx, a.js, s, n, si.State.FirstSeq, ws.Delivered)
		if err != nil {
			return nil, fmt.Errorf("queue %s: count retrying jobs: %w", n.Queue, err)
		}
		qi.Retrying = min(qi.Retrying, qi.AckPending) // jobs acknowledged meanwhile
		qi.Running = qi.AckPending - qi.Retrying
	}
	err = retry.Do(ctx, func(ctx context.Context) error {
		d, err := a.js.Stream(ctx, n.DeadStream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		qi.Dead = d.CachedInfo().State.Msgs
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue %s: dead letters %s: %w", n.Queue, n.DeadStream, err)
	}
	err = retry.Do(ctx, func(ctx context.Context) error {
		b, err := a.js.Stream(ctx, "KV_"+n.Bucket)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		qi.Records, qi.RecordTTL = b.CachedInfo().State.Msgs, Duration(b.CachedInfo().Config.MaxAge)
		backlog, err := workflow.SequenceBacklog(ctx, record.Store{JS: a.js, Bucket: n.Bucket})
		qi.SequenceWaiting, qi.SequenceKeys, qi.SequenceOldest = backlog.Jobs, backlog.Keys, backlog.Oldest
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("queue %s: job records %s: %w", n.Queue, n.Bucket, err)
	}
	return qi, nil
}

// PurgeQueue removes every job waiting in the queue, delayed jobs included (not its
// dead letters, its job records, nor its periodic schedules, which are the queue's
// configuration), and returns how many were removed. Jobs running at the time are
// removed from the stream too; their workers' commits still land in the job
// records.
func (a *Admin) PurgeQueue(ctx context.Context, name string) (uint64, error) {
	n, err := names(ctx, name)
	if err != nil {
		return 0, err
	}
	s, err := a.jobsStream(ctx, n)
	if err != nil {
		return 0, err
	}
	before := s.CachedInfo().State.Msgs
	for _, subject := range append(n.AllJobsFilter(), n.DelayedPrefix+">") {
		err := retry.Do(ctx, func(ctx context.Context) error { return s.Purge(ctx, jetstream.WithPurgeSubject(subject)) })
		if err != nil {
			return 0, fmt.Errorf("purge queue %s (stream %s, %s): %w", n.Queue, n.Stream, subject, err)
		}
	}
	var after uint64
	err = retry.Do(ctx, func(ctx context.Context) error {
		info, err := s.Info(ctx)
		if err == nil {
			after = info.State.Msgs
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge queue %s: count what is left: %w", n.Queue, err)
	}
	return before - min(before, after), nil
}

// DeleteQueue deletes the queue: its jobs stream with its workers' consumer, its dead
// letters, its job records, its unique keys and its limits' slots and rate limiter. Workers still running on it stop with an error.
func (a *Admin) DeleteQueue(ctx context.Context, name string) error {
	n, err := names(ctx, name)
	if err != nil {
		return err
	}
	if _, err := a.jobsStream(ctx, n); err != nil {
		return err
	}
	defer a.forget(n.Queue)
	for _, stream := range []string{n.Stream, n.DeadStream, "KV_" + n.Bucket, "KV_" + n.UniqueBucket, "KV_" + n.LimitsBucket(), "WORKQ_LIMIT_" + n.RateLimiter()} {
		err := retry.Do(ctx, func(ctx context.Context) error {
			err := a.js.DeleteStream(ctx, stream)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("remove queue %s: delete stream %s: %w", n.Queue, stream, err)
		}
	}
	return nil
}

// SetAckWait changes the AckWait of the queue's workers' consumer in place: the
// consumer keeps its delivery state (jobs delivered and not acknowledged stay
// so, and time out after the new AckWait from their next heartbeat). It returns
// the AckWait it replaced. Workers check the AckWait when they start: running ones
// keep heartbeating at the pace of the old one, and a worker started later with
// the old value is refused.
func (a *Admin) SetAckWait(ctx context.Context, name string, d time.Duration) (time.Duration, error) {
	n, err := names(ctx, name)
	if err != nil {
		return 0, err
	}
	s, err := a.jobsStream(ctx, n)
	if err != nil {
		return 0, err
	}
	var old time.Duration
	err = retry.Do(ctx, func(ctx context.Context) error {
		c, err := s.Consumer(ctx, n.Consumer)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("queue %s has %w (no worker has run yet; the first one sets the ack wait)", n.Queue, ErrNoWorkers)
		}
		if err != nil {
			return err
		}
		cfg := c.CachedInfo().Config
		old, cfg.AckWait = cfg.AckWait, d
		_, err = s.UpdateConsumer(ctx, cfg)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNoWorkers) {
			return 0, err
		}
		return 0, fmt.Errorf("queue %s: set ack wait of consumer %s: %w", n.Queue, n.Consumer, err)
	}
	return old, nil
}
