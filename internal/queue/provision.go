package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/retry"
)

// ErrIncompatible means a queue's stream, bucket or consumer exists with a
// configuration workq cannot use; workq never changes it silently.
var ErrIncompatible = errors.New("incompatible existing configuration")

// ErrNeedsCluster means the queue asks for more replicas than the server can place:
// a server that is not part of a cluster keeps one replica only, and a cluster needs
// at least as many JetStream nodes up as the replicas asked.
var ErrNeedsCluster = errors.New("needs a cluster")

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

// SetReplicas sets Replicas to n, 1 to 5 (what JetStream places), for the Replicas
// option of both producer and consumer.
func (c *Config) SetReplicas(n int) error {
	if n < 1 || n > 5 {
		return option.Invalid("Replicas", n, "1 to 5")
	}
	c.Replicas = n
	return nil
}

// Objects are the provisioned JetStream objects of a queue.
type Objects struct {
	Names   Names
	Stream  jetstream.Stream
	Dead    jetstream.Stream
	Records jetstream.KeyValue
	// AtomicJobs and AtomicRecords say whether the jobs stream and the records
	// bucket's stream take atomic batch publishes (group commit needs them).
	AtomicJobs, AtomicRecords bool
	// RecordTTLs says whether the records bucket's stream takes a TTL per write:
	// a workflow's waiting task is written to never expire (workflows need it).
	RecordTTLs bool
	// SchedulesErr is nil when the jobs stream takes message schedules (delayed and
	// periodic jobs), else why it does not.
	SchedulesErr error
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
	asked := cfg // what the caller set explicitly, before defaults: only that is enforced on existing objects
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
	ctx = retry.WithConn(ctx, js.Conn())
	err := retry.Placement(ctx, func(ctx context.Context) error {
		var err error
		o.Stream, err = ensureStream(ctx, js, jetstream.StreamConfig{
			Name:        n.Stream,
			Description: "workq jobs of queue " + n.Queue,
			Subjects:    append(append(n.JobsFilter(), n.ScheduleSubjects()...), n.PrioritySubjects()...),
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     storage,
			Replicas:    replicas,
			Duplicates:  cfg.Duplicates,
			// The server fires delayed and periodic jobs from message schedules kept in
			// this stream (2.12+; an older server drops the setting: SchedulesErr).
			AllowMsgSchedules: true,
		}, cfg, n.JobsFilter())
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
		}, cfg, nil)
		if err != nil {
			return err
		}
		var records jetstream.StreamConfig
		o.Records, records, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{
			Bucket:      n.Bucket,
			Description: "workq job records of queue " + n.Queue,
			History:     1,
			TTL:         cfg.RecordTTL,
			Storage:     storage,
			Replicas:    replicas,
		}, asked)
		if err != nil {
			return err
		}
		jobs := o.Stream.CachedInfo().Config
		o.SchedulesErr = allowSchedules(ctx, js, n, &jobs)
		o.AtomicJobs = allowAtomic(ctx, js, jobs)
		o.AtomicRecords = allowAtomic(ctx, js, records)
		records.AllowAtomicPublish = o.AtomicRecords // what the update wrote, so the next one keeps it
		o.RecordTTLs = allowMsgTTL(ctx, js, records)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("provision queue %s: %w", n.Queue, notProvisioned(replicasError(replicas, err)))
	}
	return o, nil
}

// ErrNotProvisioned means that an object of a queue is missing and that the user
// may not create it: an operator creates the queue first (admin.CreateQueue, 'workq
// queue create'); see package perms.
var ErrNotProvisioned = errors.New("queue not provisioned")

// notProvisioned explains err when the server refused to create a missing object of
// the queue for the user's permissions (the violation names the object): that
// the queue is not provisioned, and who provisions it. Other errors are returned as
// they are.
func notProvisioned(err error) error {
	if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), ".CREATE.") {
		return err
	}
	return fmt.Errorf("%w: part of it does not exist and this user may not create it; an operator creates the queue first ('workq queue create', or admin.CreateQueue): %w",
		ErrNotProvisioned, err)
}

// replicasError explains err when it is the server refusing to place the replicas
// asked: code 10074 from a single server (not clustered), 10005 ("no suitable peers")
// from a cluster with fewer JetStream nodes up than replicas. Both then match
// ErrNeedsCluster, and the server's error stays wrapped. Other errors are returned as
// they are.
func replicasError(replicas int, err error) error {
	switch {
	case replicas <= 1:
		return err
	case jserr.HasCode(err, 10074):
		return fmt.Errorf("a queue of %d replicas %w of at least %d nodes, and the server is a single node (on one server, leave Replicas unset or set it to 1): %w",
			replicas, ErrNeedsCluster, replicas, err)
	case jserr.HasCode(err, 10005):
		return fmt.Errorf("a queue of %d replicas %w of at least %d nodes, and the cluster has too few JetStream nodes up to place them: %w",
			replicas, ErrNeedsCluster, replicas, err)
	}
	return err
}

// ensureStream creates the stream want or checks the existing one: its retention,
// replicas and storage as cfg asks, and that it takes the subjects required (all of
// want's when required is nil). Subjects want has beyond required are added later,
// by an update (allowSchedules), to a stream created before they existed.
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, cfg Config, required []string) (jetstream.Stream, error) {
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
	if required == nil {
		required = want.Subjects
	}
	for _, subj := range required {
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

// ensureBucket creates the job-records bucket or checks the existing one. asked is the
// caller's Config before defaults, so that only what the caller set is enforced:
//
//   - History must be 1. It is not a queue option; workq reads a job's state as the
//     key's one value and counts records as the bucket's messages (workq inspect).
//   - TTL (the stream's MaxAge) is checked only when the caller set RecordTTL. A
//     worker or producer that leaves it unset accepts whatever retention the queue was
//     created with (24h by default, or a producer's RecordTTL, or none): it is the
//     operator's choice of how long finished records stay, and workers do not depend
//     on it. A caller that did set it would otherwise see records vanish earlier (or
//     stay longer) than it asked, so that is refused rather than ignored.
//   - Replicas and memory storage are checked as for the streams: when asked.
//   - The bucket's stream must take the bucket's subjects, or record writes fail.
//
// It returns the bucket and its stream's configuration.
func ensureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig, asked Config) (jetstream.KeyValue, jetstream.StreamConfig, error) {
	kv, err := js.KeyValue(ctx, want.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, want)
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			kv, err = js.KeyValue(ctx, want.Bucket)
		}
	}
	if errors.Is(err, jetstream.ErrBadBucket) {
		return nil, jetstream.StreamConfig{}, fmt.Errorf("%w: bucket %s: stream KV_%s exists but is not a key-value bucket", ErrIncompatible, want.Bucket, want.Bucket)
	}
	if err != nil {
		return nil, jetstream.StreamConfig{}, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, jetstream.StreamConfig{}, err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return nil, jetstream.StreamConfig{}, fmt.Errorf("bucket %s: unexpected status type %T", want.Bucket, st)
	}
	have := bs.StreamInfo().Config
	var bad []string
	if have.MaxMsgsPerSubject != int64(want.History) {
		bad = append(bad, fmt.Sprintf("history %d, want %d", have.MaxMsgsPerSubject, want.History))
	}
	if asked.RecordTTL > 0 && have.MaxAge != asked.RecordTTL {
		bad = append(bad, fmt.Sprintf("TTL %s, want %s", ttlString(have.MaxAge), asked.RecordTTL))
	}
	if asked.Replicas > 0 && have.Replicas != asked.Replicas {
		bad = append(bad, fmt.Sprintf("%d replicas, want %d", have.Replicas, asked.Replicas))
	}
	if asked.Memory && have.Storage != jetstream.MemoryStorage {
		bad = append(bad, fmt.Sprintf("%s storage, want memory", have.Storage))
	}
	if subj := "$KV." + want.Bucket + ".>"; !slices.Contains(have.Subjects, subj) {
		bad = append(bad, fmt.Sprintf("subjects %v lack %s", have.Subjects, subj))
	}
	if len(bad) > 0 {
		return nil, jetstream.StreamConfig{}, fmt.Errorf("%w: bucket %s has %v", ErrIncompatible, want.Bucket, bad)
	}
	return kv, have, nil
}

func ttlString(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return d.String()
}

// ConsumerConfig is the durable pull consumer every worker of the queue shares: the
// normal priority level's.
func ConsumerConfig(n Names, ackWait time.Duration, maxAckPending, replicas int) jetstream.ConsumerConfig {
	return LevelConsumerConfig(n, PriorityNormal, ackWait, maxAckPending, replicas)
}

// LevelConsumerConfig is the durable pull consumer of priority level p that every
// worker of the queue shares.
func LevelConsumerConfig(n Names, p int, ackWait time.Duration, maxAckPending, replicas int) jetstream.ConsumerConfig {
	desc := "workq workers of queue " + n.Queue
	if p != PriorityNormal {
		desc += ", priority " + strconv.Itoa(p)
	}
	return jetstream.ConsumerConfig{
		Durable:        n.LevelConsumer(p),
		Description:    desc,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        ackWait,
		MaxDeliver:     -1, // workq counts attempts itself and dead-letters; a message at MaxDeliver would stay stuck in a WorkQueue stream
		FilterSubjects: n.LevelFilter(p),
		MaxAckPending:  maxAckPending,
		Replicas:       replicas,
	}
}

// EnsureConsumer creates the workers' consumer or checks that the existing one fits
// the design. Refused, with ErrIncompatible:
//   - a push consumer: workers pull;
//   - another AckWait: workers with different AckWaits on one queue would time each
//     other's jobs out;
//   - an ack policy other than explicit: the fenced commit acks each job itself;
//   - other filters: the workers would miss jobs or take another consumer's;
//   - a finite MaxDeliver: a job that reaches it stays in the WorkQueue stream,
//     never delivered again and never dead-lettered (workq counts attempts itself);
//   - BackOff: it replaces AckWait for redelivery, so a heartbeat paced on AckWait
//     could lose a live job to a shorter step;
//   - HeadersOnly: workers would get jobs without their payload.
//
// MaxAckPending, replicas and the like are left as they are: they change throughput
// or durability, not correctness.
//
// beforeCreate, if given, completes the configuration of a consumer about to be created
// (not of one that exists).
func EnsureConsumer(ctx context.Context, s jetstream.Stream, want jetstream.ConsumerConfig, beforeCreate ...func(context.Context, *jetstream.ConsumerConfig) error) (jetstream.Consumer, error) {
	stream := s.CachedInfo().Config.Name
	var c jetstream.Consumer
	err := retry.Do(ctx, func(ctx context.Context) error {
		var err error
		c, err = s.Consumer(ctx, want.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			for _, f := range beforeCreate {
				if err := f(ctx, &want); err != nil {
					return err
				}
			}
			c, err = s.CreateConsumer(ctx, want)
			if errors.Is(err, jetstream.ErrConsumerExists) {
				c, err = s.Consumer(ctx, want.Durable)
			}
		}
		return err
	})
	if errors.Is(err, jetstream.ErrNotPullConsumer) {
		return nil, fmt.Errorf("%w: consumer %s of stream %s is a push consumer; workq workers need a pull consumer (delete it to let workq create its own)",
			ErrIncompatible, want.Durable, stream)
	}
	if err != nil {
		return nil, fmt.Errorf("consumer %s on stream %s: %w", want.Durable, stream, notProvisioned(err))
	}
	have := c.CachedInfo().Config
	var bad []string
	if have.AckWait != want.AckWait {
		bad = append(bad, fmt.Sprintf("AckWait %s, this worker wants %s", have.AckWait, want.AckWait))
	}
	if have.AckPolicy != want.AckPolicy {
		bad = append(bad, fmt.Sprintf("ack policy %s, want %s", have.AckPolicy, want.AckPolicy))
	}
	if !sameSet(filters(have), filters(want)) {
		bad = append(bad, fmt.Sprintf("filters %v, want %v", filters(have), filters(want)))
	}
	if have.MaxDeliver > 0 {
		bad = append(bad, fmt.Sprintf("MaxDeliver %d, want unlimited (a job at MaxDeliver would stay stuck in the stream)", have.MaxDeliver))
	}
	if len(have.BackOff) > 0 {
		bad = append(bad, fmt.Sprintf("BackOff %v, want none", have.BackOff))
	}
	if have.HeadersOnly {
		bad = append(bad, "headers only, want payloads")
	}
	switch {
	case len(bad) == 1 && have.AckWait != want.AckWait:
		// The one setting workers choose: the queue keeps one, which admin changes.
		return nil, fmt.Errorf("%w: consumer %s of stream %s has %v (every worker of a queue must agree: run the worker with AckWait %s, "+
			"or change the queue's with admin.SetAckWait (workq queue set <queue> --ack-wait))", ErrIncompatible, want.Durable, stream, bad, have.AckWait)
	case len(bad) > 0:
		return nil, fmt.Errorf("%w: consumer %s of stream %s has %v (every worker of a queue must agree; delete the consumer to let workq create its own)",
			ErrIncompatible, want.Durable, stream, bad)
	}
	return c, nil
}

// filters are a consumer's filter subjects, whichever of the two fields holds them.
func filters(c jetstream.ConsumerConfig) []string {
	if c.FilterSubject != "" {
		return append([]string{c.FilterSubject}, c.FilterSubjects...)
	}
	return c.FilterSubjects
}

// sameSet reports whether a and b hold the same subjects, in any order.
func sameSet(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			return false
		}
	}
	return true
}
