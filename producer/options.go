package producer

import (
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
)

// Defaults of the options, named Default<Option> as nats.go and net/http name theirs.
const (
	// DefaultDuplicateWindow is how long a job id is remembered for dedup in a queue
	// this producer creates (DuplicateWindow).
	DefaultDuplicateWindow = queue.DefaultDuplicates
	// DefaultRecordTTL is how long job records live after their last write in a
	// queue this producer creates (RecordTTL).
	DefaultRecordTTL = queue.DefaultRecordTTL
	// DefaultMaxInFlight bounds the publishes of one EnqueueBatch awaiting their
	// acknowledgement (MaxInFlight).
	DefaultMaxInFlight = 4000
	// DefaultAckTimeout is how long a batched publish waits for its acknowledgement
	// before it is sent again (AckTimeout).
	DefaultAckTimeout = 5 * time.Second
)

// Option configures a Producer. New skips nil options, so optional settings can be
// passed as a variable that may be nil. There is no Logger option: a producer logs
// nothing, because every failure it meets is returned to its caller (a worker and a
// Locker, which meet failures in the background, log to slog.Default()).
type Option func(*config) error

type config struct {
	queue       queue.Config
	maxInFlight int
	ackTimeout  time.Duration
	registerer  prometheus.Registerer
	// replicaReads lets Status read records from any replica.
	replicaReads bool
	groupCommit  *bool
	uniqueGrace  time.Duration
	tracer       Tracer
}

// Replicas sets the replica count of the queue's streams and bucket when this
// producer creates them, and is checked against them when they exist. Default: 1 on
// creation, which works on a single server; an existing queue is taken as it is.
// Use 3 on a cluster.
func Replicas(n int) Option {
	return func(c *config) error { return c.queue.SetReplicas(n) }
}

// MemoryStorage keeps the queue in server memory: faster, but jobs are lost when the
// server restarts. Default: file storage.
func MemoryStorage() Option { return func(c *config) error { c.queue.Memory = true; return nil } }

// DuplicateWindow sets how long a job id is remembered for dedup when this producer
// creates the queue. Default DefaultDuplicateWindow (2 minutes), the server's own
// default: long enough to cover a client's retries, short enough that the server's
// dedup index stays small.
func DuplicateWindow(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second {
			return option.Invalid("DuplicateWindow", d, "at least 1s")
		}
		c.queue.Duplicates = d
		return nil
	}
}

// RecordTTL sets how long job records live after their last write. It applies when
// this producer creates the queue; on an existing queue whose records live for
// another time, New fails with ErrIncompatible rather than ignore it. Unset, the
// producer accepts the queue's retention, and a new queue gets DefaultRecordTTL (24
// hours): long enough to look a finished job up the next day, short enough that the
// bucket does not grow without bound.
func RecordTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second {
			return option.Invalid("RecordTTL", d, "at least 1s")
		}
		c.queue.RecordTTL = d
		return nil
	}
}

// MaxInFlight bounds how many publishes of one EnqueueBatch await the server's
// acknowledgement at once. Default DefaultMaxInFlight (4000), the client's own
// default limit of pending asynchronous publishes: the deepest pipeline one batch can
// use alone. When other publishers share the connection and the client's limit is
// reached first, the batch waits for its oldest acknowledgement and goes on; the
// client's stall error never reaches the caller.
func MaxInFlight(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return option.Invalid("MaxInFlight", n, "at least 1")
		}
		c.maxInFlight = n
		return nil
	}
}

// AckTimeout is how long a batched publish may wait for its acknowledgement before
// it is sent again (safe: the job id deduplicates). Default DefaultAckTimeout (5
// seconds): far above a healthy round trip, short enough that a publish whose
// acknowledgement was lost (a reconnect) is sent again soon.
func AckTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return option.Invalid("AckTimeout", d, "more than 0")
		}
		c.ackTimeout = d
		return nil
	}
}

// Metrics registers the producer's metrics on reg, labelled by queue:
// workq_jobs_enqueued_total, workq_enqueue_duplicates_total,
// workq_enqueue_errors_total, workq_enqueue_duration_seconds and
// workq_enqueue_batch_duration_seconds. Several producers (and workers and lockers)
// may share one registry; producers of the same queue then share their series.
// Default: no metrics, so that nothing is registered on a registry you did not
// choose; a nil reg keeps that default. NewQueueCollector exports the queue's depth,
// read from the server.
func Metrics(reg prometheus.Registerer) Option {
	return func(c *config) error {
		c.registerer = reg
		return nil
	}
}

// ReplicaReads lets Status read job records from any replica of a replicated queue
// (a direct get) instead of the stream leader. Cheaper, and it spreads reads over the
// cluster, but a replica that lags — one restarting after a crash — answers with an
// older record: a job that is done may read as running or not found. Default off:
// Status reads what the leader has.
func ReplicaReads() Option { return func(c *config) error { c.replicaReads = true; return nil } }

// EnqueueOption configures one Enqueue. Enqueue skips nil options.
type EnqueueOption func(*Job)

// ID sets the job id, the dedup key: any text of 1 to 200 bytes of UTF-8 without
// control characters ("user@example.com", "order 42"). Listings, records and the
// handler (consumer.Job.ID) show it as given; on the wire (subjects, KV keys, the
// Nats-Msg-Id header) an id made only of letters, digits and _ - = / . (not
// starting with "==", nor starting, ending or doubling '.') is its own token and any
// other is "==" and its unpadded URL-safe base64 (docs/wire-format.md). Default: a
// generated unique id that sorts by time.
func ID(id string) EnqueueOption { return func(j *Job) { j.ID = id } }

// Kind sets the job's kind, which consumer.Mux routes on. Default: none.
func Kind(kind string) EnqueueOption { return func(j *Job) { j.Kind = kind } }

// Header adds a header to the job message; handlers read it with Job.Header.
func Header(key, value string) EnqueueOption {
	return func(j *Job) {
		if j.Header == nil {
			j.Header = nats.Header{}
		}
		j.Header.Add(key, value)
	}
}

// MaxAttempts overrides the worker's attempt limit for this job. Default: the worker's.
func MaxAttempts(n int) EnqueueOption { return func(j *Job) { j.MaxAttempts = n } }

// At delays the job until t: it does not start before t, and starts as soon after
// it as a worker is free. The server keeps the job as a message schedule in the
// queue's stream (replicated with it) and fires it at t itself: no process of yours
// needs to run meanwhile. A t that has come (or the zero time) enqueues the job to
// run at once. Its id is reserved while it waits: a second delayed enqueue of the id
// is a duplicate until it fires, and an enqueue to run at once is a duplicate within
// the duplicate window (docs/scheduling.md says more). Status reports it
// scheduled; Cancel cancels it. It needs nats-server 2.12 or later.
func At(t time.Time) EnqueueOption { return func(j *Job) { j.At = t } }

// After delays the job by d from the enqueue: At(time.Now().Add(d)). A d of 0
// enqueues the job to run at once; a negative d fails the enqueue with
// ErrInvalidOption (a delay of -5s is a mistake, not "at once").
func After(d time.Duration) EnqueueOption {
	return func(j *Job) {
		switch {
		case d > 0:
			j.At = time.Now().Add(d)
		case d == 0:
			j.At = time.Time{}
		default:
			j.optionErr = option.Invalid("After", d, "0 or more (0: at once)")
		}
	}
}

// GroupCommit sets whether enqueues share atomic batch publishes: the jobs of a
// batch, and single enqueues from concurrent goroutines, are stored by one server
// write for many jobs instead of one each. Batches form only when publishes queue
// up, so a lone enqueue pays nothing. A batch the server refuses (it holds a job id
// already enqueued) is sent again job by job, so duplicates are reported as without
// it.
//
// Default: on when the queue has more than one replica, off on a single replica.
// Turn it on for a single server that fsyncs every write (sync_interval: always):
// a batch enqueue then stores 5–7 times as many jobs a second as single publishes
// (BENCHMARKS.md); leave it off on one with the default lazy fsync, where the
// server's staging of each batch costs more than it saves (see
// consumer.GroupCommit). It needs a server of version 2.12 or later; older ones get
// single publishes.
func GroupCommit(on bool) Option { return func(c *config) error { c.groupCommit = &on; return nil } }
