package producer

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/groupcommit"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/workflow"
)

// DeadLetterReserve is how many bytes of the server's max payload (nc.MaxPayload(),
// which counts headers too) a job leaves free: a job's payload and headers may take
// at most max payload − DeadLetterReserve bytes. The room is for the headers its dead
// letter adds (job id, queue, attempts, the error's first KiB, where it came from,
// when it died), so that a job that fails for good always reaches dead letters
// instead of being redelivered forever. Enqueue refuses a larger job with
// ErrPayloadTooLarge.
const DeadLetterReserve = queue.DeadLetterReserve

// Producer enqueues jobs onto one queue. It is safe for concurrent use.
type Producer struct {
	js      jetstream.JetStream
	names   queue.Names
	objects *queue.Objects
	records record.Store
	group   *groupcommit.Writer // nil: single publishes
	cfg     config
	metrics *producerMetrics
	uniques queue.LazyUniques  // the unique bucket, opened by the first unique enqueue
	flows   *workflow.Releaser // tells a cancelled workflow task's dependents
	// workflowStep, when set (by tests), is called before each write of
	// EnqueueWorkflow with the step ("record", "root") and the task's index, and
	// before a sequenced enqueue's batch ("sequence-batch", its try) and its publish
	// ("sequence-publish"); an error it returns fails that write.
	workflowStep func(step string, n int) error

	indexMu sync.Mutex
	index   *jobIndex // Jobs' and JobCounts' index of the job records, from their first call
}

// New returns a producer for queue, creating the queue's streams and bucket if they
// are missing. While the server is unreachable it waits, until ctx ends. A nil ctx or
// js is an error; nil options are skipped.
func New(ctx context.Context, js jetstream.JetStream, queueName string, opts ...Option) (*Producer, error) {
	switch {
	case ctx == nil:
		return nil, fmt.Errorf("producer: queue %s: %w", queueName, option.Nil("context"))
	case js == nil:
		return nil, fmt.Errorf("producer: queue %s: %w", queueName, option.Nil("JetStream"))
	}
	cfg := config{maxInFlight: DefaultMaxInFlight, ackTimeout: DefaultAckTimeout, uniqueGrace: DefaultUniqueGrace}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("producer: queue %s: %w", queueName, err)
		}
	}
	names, err := queue.NamesFor(queueName)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	m, err := newMetrics(cfg.registerer, names.Queue)
	if err != nil {
		return nil, fmt.Errorf("producer: queue %s: register metrics: %w", names.Queue, err)
	}
	ctx = retry.WithConn(ctx, js.Conn()) // a request the user may not make fails rather than waits
	objs, err := queue.Provision(ctx, js, names, cfg.queue)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	records, err := record.NewStore(ctx, js, objs.Records, names.Bucket, cfg.replicaReads)
	if err != nil {
		return nil, fmt.Errorf("producer: queue %s: %w", names.Queue, err)
	}
	group := groupcommit.For(js, cfg.groupCommit, objs.Stream.CachedInfo().Config.Replicas, objs.AtomicJobs)
	return &Producer{js: js, names: names, objects: objs, records: records, group: group, cfg: cfg, metrics: m,
		flows: &workflow.Releaser{Store: records, JS: js, Names: names, Stream: objs.Stream}}, nil
}

// Queue is the queue's name.
func (p *Producer) Queue() string { return p.names.Queue }
