package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jsx"
)

// ErrIncompatible means a queue's stream, bucket or consumer exists with a
// configuration workq cannot use; workq never changes it silently.
var ErrIncompatible = errors.New("incompatible existing configuration")

// Defaults of a queue's configuration.
const (
	DefaultDuplicates = 2 * time.Minute
	DefaultRecordTTL  = 24 * time.Hour
)

// Config is what a producer or worker asks of the queue's objects when it creates them.
type Config struct {
	// Replicas of every stream and the bucket. 0 takes what exists, 1 when creating.
	Replicas int
	// Memory asks for memory storage (lost on server restart). Default file storage.
	Memory bool
	// Duplicates is the dedup window for job ids. 0 means DefaultDuplicates.
	Duplicates time.Duration
	// RecordTTL is how long a job record lives after its last write. 0 means DefaultRecordTTL.
	RecordTTL time.Duration
}

// Objects are the provisioned JetStream objects of a queue.
type Objects struct {
	Names   Names
	Stream  jetstream.Stream
	Dead    jetstream.Stream
	Records jetstream.KeyValue
}

// Provision creates the queue's streams and bucket if they are missing and checks
// them if they exist. It is idempotent and safe to race with other processes. While
// the server is unreachable it waits, up to ctx's end.
func Provision(ctx context.Context, js jetstream.JetStream, n Names, cfg Config) (*Objects, error) {
	if cfg.Replicas < 0 || cfg.Replicas > 5 {
		return nil, fmt.Errorf("queue %s: replicas %d: want 1 to 5", n.Queue, cfg.Replicas)
	}
	if cfg.Duplicates < 0 || cfg.RecordTTL < 0 {
		return nil, fmt.Errorf("queue %s: negative duplicate window or record TTL", n.Queue)
	}
	if cfg.Duplicates == 0 {
		cfg.Duplicates = DefaultDuplicates
	}
	if cfg.RecordTTL == 0 {
		cfg.RecordTTL = DefaultRecordTTL
	}
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	replicas := max(cfg.Replicas, 1)
	o := &Objects{Names: n}
	err := jsx.Retry(ctx, func(ctx context.Context) error {
		var err error
		o.Stream, err = ensureStream(ctx, js, jetstream.StreamConfig{
			Name:        n.Stream,
			Description: "workq jobs of queue " + n.Queue,
			Subjects:    n.JobsFilter(),
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     storage,
			Replicas:    replicas,
			Duplicates:  cfg.Duplicates,
		}, cfg)
		if err != nil {
			return err
		}
		o.Dead, err = ensureStream(ctx, js, jetstream.StreamConfig{
			Name:        n.DeadStream,
			Description: "workq dead letters of queue " + n.Queue,
			Subjects:    []string{n.DeadSubject},
			Retention:   jetstream.LimitsPolicy,
			Storage:     storage,
			Replicas:    replicas,
			Duplicates:  cfg.Duplicates,
		}, cfg)
		if err != nil {
			return err
		}
		o.Records, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{
			Bucket:      n.Bucket,
			Description: "workq job records of queue " + n.Queue,
			History:     1,
			TTL:         cfg.RecordTTL,
			Storage:     storage,
			Replicas:    replicas,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("provision queue %s: %w", n.Queue, err)
	}
	return o, nil
}

func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, cfg Config) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = js.Stream(ctx, want.Name) // another process created it first
		}
	}
	if err != nil {
		return nil, err
	}
	have := s.CachedInfo().Config
	var bad []string
	if have.Retention != want.Retention {
		bad = append(bad, fmt.Sprintf("retention %s, want %s", have.Retention, want.Retention))
	}
	for _, subj := range want.Subjects {
		if !slices.Contains(have.Subjects, subj) {
			bad = append(bad, fmt.Sprintf("subjects %v lack %s", have.Subjects, subj))
		}
	}
	if cfg.Replicas > 0 && have.Replicas != cfg.Replicas {
		bad = append(bad, fmt.Sprintf("%d replicas, want %d", have.Replicas, cfg.Replicas))
	}
	if cfg.Memory && have.Storage != jetstream.MemoryStorage {
		bad = append(bad, fmt.Sprintf("%s storage, want memory", have.Storage))
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w: stream %s has %v", ErrIncompatible, want.Name, bad)
	}
	return s, nil
}

func ensureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, want.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, want)
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			kv, err = js.KeyValue(ctx, want.Bucket)
		}
	}
	return kv, err
}

// ConsumerConfig is the durable pull consumer every worker of the queue shares.
func ConsumerConfig(n Names, ackWait time.Duration, maxAckPending, replicas int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        n.Consumer,
		Description:    "workq workers of queue " + n.Queue,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        ackWait,
		MaxDeliver:     -1, // workq counts attempts itself and dead-letters; a message at MaxDeliver would stay stuck in a WorkQueue stream
		FilterSubjects: n.JobsFilter(),
		MaxAckPending:  maxAckPending,
		Replicas:       replicas,
	}
}

// EnsureConsumer creates the workers' consumer or checks that the existing one has
// the same AckWait and filter: workers with different AckWaits on one queue would
// time each other's jobs out.
func EnsureConsumer(ctx context.Context, s jetstream.Stream, want jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	var c jetstream.Consumer
	err := jsx.Retry(ctx, func(ctx context.Context) error {
		var err error
		c, err = s.Consumer(ctx, want.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			c, err = s.CreateConsumer(ctx, want)
			if errors.Is(err, jetstream.ErrConsumerExists) {
				c, err = s.Consumer(ctx, want.Durable)
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s on stream %s: %w", want.Durable, s.CachedInfo().Config.Name, err)
	}
	have := c.CachedInfo().Config
	var bad []string
	if have.AckWait != want.AckWait {
		bad = append(bad, fmt.Sprintf("AckWait %s, this worker wants %s", have.AckWait, want.AckWait))
	}
	if have.AckPolicy != jetstream.AckExplicitPolicy {
		bad = append(bad, "ack policy "+have.AckPolicy.String())
	}
	if !slices.Equal(have.FilterSubjects, want.FilterSubjects) {
		bad = append(bad, fmt.Sprintf("filters %v %q, want %v", have.FilterSubjects, have.FilterSubject, want.FilterSubjects))
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w: consumer %s of stream %s has %v (every worker of a queue must agree; delete the consumer to change it)",
			ErrIncompatible, want.Durable, s.CachedInfo().Config.Name, bad)
	}
	return c, nil
}
