package consumer

import (
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
)

// Defaults of the options, named Default<Option> as nats.go and net/http name theirs.
const (
	// DefaultConcurrency is how many jobs a worker runs at once (Concurrency).
	DefaultConcurrency = 8
	// DefaultAckWait is how long a job may go without a heartbeat before it moves
	// to another worker (AckWait).
	DefaultAckWait = 30 * time.Second
	// DefaultMaxAttempts is how many times a job runs before it is dead-lettered
	// (MaxAttempts).
	DefaultMaxAttempts = 10
	// DefaultBackoffBase and DefaultBackoffLimit bound the default retry delay,
	// Exponential(DefaultBackoffBase, DefaultBackoffLimit) (Backoff).
	DefaultBackoffBase  = time.Second
	DefaultBackoffLimit = 5 * time.Minute
	// DefaultDrainTimeout is how long running jobs may finish once Run's context
	// ends (DrainTimeout).
	DefaultDrainTimeout = 30 * time.Second
	// DefaultMaxAckPending is the least MaxAckPending a worker creating the queue's
	// consumer sets unless told (MaxAckPending); more when its concurrency and pull
	// buffer need it.
	DefaultMaxAckPending = 1000
)

// Option configures a Worker. New skips nil options, so optional settings can be
// passed as a variable that may be nil.
type Option func(*config) error

type config struct {
	concurrency   int
	ackWait       time.Duration
	heartbeat     time.Duration
	maxAttempts   int
	backoff       BackoffFunc
	timeout       time.Duration
	drainTimeout  time.Duration
	name          string
	logger        *slog.Logger
	unfenced      bool
	maxAckPending int
	prefetch      int
	middleware    []Middleware
	queue         queue.Config
	registerer    prometheus.Registerer
	groupCommit   *bool
	tracer        Tracer
}

func defaults() config {
	host, _ := os.Hostname()
	return config{
		concurrency:  DefaultConcurrency,
		ackWait:      DefaultAckWait,
		maxAttempts:  DefaultMaxAttempts,
		backoff:      Exponential(DefaultBackoffBase, DefaultBackoffLimit),
		drainTimeout: DefaultDrainTimeout,
		prefetch:     -1,
		name:         host + "-" + strconv.Itoa(os.Getpid()),
		logger:       slog.Default(),
	}
}

// Concurrency sets how many jobs the worker runs at once. Default
// DefaultConcurrency (8): enough to overlap the round trips of short jobs without
// overloading a small machine; raise it for handlers that mostly wait.
func Concurrency(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return option.Invalid("Concurrency", n, "at least 1")
		}
		c.concurrency = n
		return nil
	}
}

// Prefetch fixes how many jobs the worker pulls ahead of its free handlers; 0 holds
// none beyond the ones running. Jobs in the buffer are this worker's from the
// server's point of view (no other worker can take them); the worker reports progress
// on them as on running jobs, so they do not time out while they wait.
//
// By default the depth follows the handlers: none while their pace is unknown (a
// worker starting on long jobs takes only what it can run, and a worker started later
// gets the rest), then about a tenth of AckWait (at most 50ms) of work at the average
// time a handler slot spends per job, at most 512 jobs and about 32 MiB of payload.
// So it is deep for short jobs, and handlers never wait on a pull, and empty for long
// ones, and one worker does not sit on jobs that idle workers could run. Set it to
// pin the depth.
//
// While the queue has limits (admin.SetLimits) the worker pulls nothing ahead, and
// holds no more jobs than it may run: min(Concurrency, MaxRunning) of each priority
// level, whatever Prefetch says. Jobs held waiting for a slot would be kept from the
// queue's other workers and from retries that come due.
func Prefetch(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return option.Invalid("Prefetch", n, "0 or more")
		}
		c.prefetch = n
		return nil
	}
}

// AckWait is how long a job may go without a heartbeat before JetStream hands it to
// another worker. Every worker of a queue must use the same value (it is the shared
// consumer's setting). Default DefaultAckWait (30s): long enough to ride out a GC
// pause or a brief network blip, short enough that a dead worker's job moves on
// within a minute.
func AckWait(d time.Duration) Option {
	return func(c *config) error {
		if d < 100*time.Millisecond {
			return option.Invalid("AckWait", d, "at least 100ms")
		}
		c.ackWait = d
		return nil
	}
}

// minHeartbeat is the shortest Heartbeat interval: each beat is a message to the
// server (and, fenced, a read of the job record) per running job.
const minHeartbeat = 10 * time.Millisecond

// Heartbeat sets how often a running job's progress is reported: at least 10ms, and
// shorter than AckWait. Default a third of AckWait, so two heartbeats can be lost
// before the job moves on.
func Heartbeat(d time.Duration) Option {
	return func(c *config) error {
		if d < minHeartbeat {
			return option.Invalid("Heartbeat", d, "at least "+minHeartbeat.String())
		}
		c.heartbeat = d
		return nil
	}
}

// MaxAttempts is how many times a job runs before it is dead-lettered. A job's own
// limit (producer.MaxAttempts) overrides it. Default DefaultMaxAttempts (10): with
// the default backoff a failing job is retried over 4 to 9 minutes, long enough to
// ride out a brief outage of what it depends on, short enough that a job that can
// never succeed reaches dead letters soon.
func MaxAttempts(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return option.Invalid("MaxAttempts", n, "at least 1")
		}
		c.maxAttempts = n
		return nil
	}
}

// BackoffFunc returns how long to wait before attempt+1 after attempt failed.
type BackoffFunc func(attempt int) time.Duration

// Backoff sets the retry delay. A negative delay from f counts as 0: retry at once.
// Default Exponential(DefaultBackoffBase, DefaultBackoffLimit), 1s doubling up to
// 5m with jitter: a failing dependency gets room to recover, and jobs that failed
// together do not retry together.
func Backoff(f BackoffFunc) Option {
	return func(c *config) error {
		if f == nil {
			return option.Invalid("Backoff", nil, "a function")
		}
		c.backoff = func(attempt int) time.Duration { return max(f(attempt), 0) }
		return nil
	}
}

// Exponential doubles the delay from base with every attempt up to limit, and picks
// the delay at random in its upper half (jitter), so jobs that failed together do not
// retry together. A base ≤ 0 retries at once every time; a limit below base is taken
// as base.
func Exponential(base, limit time.Duration) BackoffFunc {
	base = max(base, 0)
	limit = max(limit, base)
	return func(attempt int) time.Duration {
		if base == 0 {
			return 0
		}
		d := base
		for i := 1; i < attempt && d < limit; i++ {
			if d > limit/2 {
				d = limit // doubling would pass limit, or overflow
				break
			}
			d *= 2
		}
		d = min(d, limit)
		if d <= 1 {
			return d
		}
		return d/2 + rand.N(d/2+1)
	}
}

// Constant retries after d every time; a d below 0 retries at once.
func Constant(d time.Duration) BackoffFunc {
	d = max(d, 0)
	return func(int) time.Duration { return d }
}

// Timeout bounds one run of a handler: its context ends then, with a cause naming the
// timeout. A handler that returns the context's error fails the run, which is retried
// like any failure (then dead-lettered at MaxAttempts); one that ignores its context
// and returns nil is committed. Default none: heartbeats keep long jobs alive, and
// handlers should watch their context.
func Timeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return option.Invalid("Timeout", d, "more than 0")
		}
		c.timeout = d
		return nil
	}
}

// DrainTimeout is how long Run lets running jobs finish after its context ends; then
// their contexts are cancelled and the jobs handed back for prompt redelivery.
// Default DefaultDrainTimeout (30s).
func DrainTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return option.Invalid("DrainTimeout", d, "0 or more")
		}
		c.drainTimeout = d
		return nil
	}
}

// Name names the worker in job records and logs. Default host-pid.
func Name(name string) Option {
	return func(c *config) error {
		if name == "" {
			return option.Invalid("Name", name, "a non-empty name")
		}
		c.name = name
		return nil
	}
}

// Logger sets the logger. Successful jobs log nothing; reassigned jobs, dead letters
// and errors log one line each. Default: slog.Default() as New finds it, as in
// kvlock, because a job that was reassigned or dead-lettered, or pulls that keep
// failing, must not go unseen, and a program routes every package's logs at once
// with slog.SetDefault. To discard them, pass slog.New(slog.DiscardHandler).
func Logger(l *slog.Logger) Option {
	return func(c *config) error {
		if err := option.CheckLogger(l); err != nil {
			return err
		}
		c.logger = l
		return nil
	}
}

// Metrics registers the worker's metrics on reg, labelled by queue (and kind and
// outcome where they apply): workq_jobs_processed_total (its outcome is how each
// delivery ended: committed, retried, dead, handed_back, reassigned, cancelled,
// failed, already_ended, watched, busy, early, unique_dropped; the names of Stats'
// fields, docs/metrics.md), workq_job_handler_duration_seconds,
// workq_job_wait_seconds, workq_jobs_in_flight, workq_heartbeats_total and
// workq_redeliveries_total. The kind label takes the first 50 distinct job kinds a
// process sees per queue; later kinds are counted as "other", so that kinds set by
// any publisher cannot create unbounded series. Job ids are never labels. Several
// workers (and producers and lockers) may share one registry; workers of the same
// queue then share their series. Default: no metrics, so that nothing is registered
// on a registry you did not choose; a nil reg keeps that default.
func Metrics(reg prometheus.Registerer) Option {
	return func(c *config) error {
		c.registerer = reg
		return nil
	}
}

// Unfenced turns fencing off for idempotent handlers: no claim or commit writes, a
// plain ack after the handler returns. A superseded worker may then finish a job that
// another worker also runs (at-least-once). Job records are written only for failures
// and for jobs that succeed after a retry. Default off.
func Unfenced() Option { return func(c *config) error { c.unfenced = true; return nil } }

// MaxAckPending bounds the jobs handed out and not yet acknowledged across all
// workers of the queue; set when the worker creates the consumer. It should be at
// least the sum of every worker's concurrency and pull buffer, or workers wait on it.
// Default max(DefaultMaxAckPending, 4×(Concurrency + Prefetch)), with 512 for an
// adaptive Prefetch: room for four such workers.
func MaxAckPending(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return option.Invalid("MaxAckPending", n, "at least 1")
		}
		c.maxAckPending = n
		return nil
	}
}

// Use wraps the handler in middleware, the first given outermost. Nil middleware is
// skipped.
func Use(mw ...Middleware) Option {
	return func(c *config) error { c.middleware = append(c.middleware, mw...); return nil }
}

// Replicas sets the replica count when the worker creates the queue (see
// producer.Replicas). Default: 1 on creation, an existing queue as it is.
func Replicas(n int) Option {
	return func(c *config) error { return c.queue.SetReplicas(n) }
}

// GroupCommit sets whether the record writes of concurrent jobs (claims, commits,
// failures) share atomic batch publishes, one server write for many jobs, instead
// of one write each. Batches form only when writes queue up, so a lone job pays
// nothing; a batch refused because one job's compare-and-set lost is sent again
// job by job, so fencing is unchanged.
//
// Default: on when the queue has more than one replica (a batch is one replicated
// proposal instead of one per job), off on a single replica, where the server stages
// each batch in a file store of its own (a few milliseconds per batch, whatever its
// size): that costs more than it saves unless the server fsyncs every write
// (sync_interval: always), and even then it only matches single writes here,
// because each job's removal from the queue is an fsync of its own (BENCHMARKS.md).
// It needs a server of version 2.12 or later; older ones get single writes.
func GroupCommit(on bool) Option {
	return func(c *config) error { c.groupCommit = &on; return nil }
}

// MemoryStorage creates the queue in server memory if the worker creates it (see
// producer.MemoryStorage). Default file storage.
func MemoryStorage() Option { return func(c *config) error { c.queue.Memory = true; return nil } }
