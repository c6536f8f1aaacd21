package kvlock

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/option"
)

// Defaults of the options, named Default<Option> as nats.go and net/http name theirs,
// and the bounds beside them.
const (
	// DefaultBucket is the KV bucket (stream KV_WORKQ_LOCKS) that holds locks and
	// semaphores unless the Bucket option names another.
	DefaultBucket = "WORKQ_LOCKS"

	// DefaultReplicas is the replica count of the lock bucket and limiter streams
	// when a Locker creates them (Replicas).
	DefaultReplicas = 1

	// DefaultTTL is the lease of a lock unless the TTL option or LockTTL says
	// otherwise. The lease only matters when the holder stops renewing (crash,
	// pause, partition): a live holder renews it forever. 10 s keeps renewals rare
	// (every ~3.3 s) while a crashed holder blocks others for at most ~10 s.
	DefaultTTL = 10 * time.Second

	// MinTTL is the shortest lease accepted. Below it a lease cannot be renewed
	// reliably: a renewal is a round trip to the server, made every third of the lease.
	MinTTL = 50 * time.Millisecond

	// markerTTL is how long release and expiry markers stay in the bucket. While one
	// stays, a waiter starting to watch sees the key free at once and this process
	// re-acquires the key in one round trip; then the marker goes, so names used
	// once (a pool of locks keyed by object id) do not accumulate.
	markerTTL = time.Minute
)

// Option configures a Locker (New).
type Option func(*config) error

type config struct {
	bucket     string
	replicas   int
	owner      string
	defaultTTL time.Duration
	logger     *slog.Logger
	registerer prometheus.Registerer
}

func defaultConfig() config {
	return config{
		bucket:     DefaultBucket,
		replicas:   DefaultReplicas,
		owner:      filepath.Base(os.Args[0]),
		defaultTTL: DefaultTTL,
		logger:     slog.Default(),
	}
}

// Bucket names the KV bucket holding the locks (letters, digits, '_' and '-').
// Default DefaultBucket ("WORKQ_LOCKS"), so that every workq process on a server
// shares locks without configuration; use another bucket to isolate applications.
func Bucket(name string) Option {
	return func(c *config) error {
		if name == "" {
			return fmt.Errorf("bucket name is empty: %w", ErrInvalidName)
		}
		for i := 0; i < len(name); i++ {
			if !plainByte(name[i]) {
				return fmt.Errorf("bucket name %q has %q at offset %d; use only letters, digits, '_' and '-': %w",
					name, rune(name[i]), i, ErrInvalidName)
			}
		}
		c.bucket = name
		return nil
	}
}

// Replicas sets how many servers keep the lock bucket and limiter streams when this
// Locker creates them (1 to 5). Default DefaultReplicas (1), which works on a single
// server; use 3 on a cluster so that locks survive the loss of a server. An existing
// bucket keeps its own replica count.
func Replicas(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 5 {
			return option.Invalid("Replicas", n, "1 to 5")
		}
		c.replicas = n
		return nil
	}
}

// Owner sets the label recorded in every lock this Locker takes, next to the host
// name and process id, so that ErrLocked and `nats kv get` say who holds a lock.
// Default: the program's name (the base name of os.Args[0]).
func Owner(label string) Option {
	return func(c *config) error {
		c.owner = label
		return nil
	}
}

// LockTTL sets the lease used by Acquire and TryAcquire calls without a TTL
// option. Default DefaultTTL (10 s); see TTL for what the lease means.
func LockTTL(d time.Duration) Option {
	return func(c *config) error {
		if err := checkTTL("LockTTL", d); err != nil {
			return err
		}
		c.defaultTTL = d
		return nil
	}
}

// Logger sets the logger for takeovers (Info), lost locks (Warn) and failed
// renewals (Debug); nothing is logged while locks come and go as they should.
// Default: slog.Default() as New finds it, as in consumer, because a lock lost or
// taken over from a silent holder must not go unseen, and a program routes every
// package's logs at once with slog.SetDefault. To discard them, pass
// slog.New(slog.DiscardHandler).
func Logger(l *slog.Logger) Option {
	return func(c *config) error {
		if err := option.CheckLogger(l); err != nil {
			return err
		}
		c.logger = l
		return nil
	}
}

// Metrics registers the package's metrics on reg: workq_lock_acquire_wait_seconds,
// workq_locks_held, workq_lock_contention_total, workq_locks_lost_total and
// workq_limiter_decisions_total. Labels are bounded (kind, reason, result), never a
// lock name. Several Lockers may share one registry; they then share the metrics.
// Default: no metrics, so that nothing is registered on a registry you did not choose.
func Metrics(reg prometheus.Registerer) Option {
	return func(c *config) error {
		c.registerer = reg
		return nil
	}
}

// AcquireOption configures one Acquire, TryAcquire or Do call.
type AcquireOption func(*acquireConfig) error

type acquireConfig struct {
	ttl     time.Duration
	noRenew bool
}

// NoRenew makes the lock a fixed lease: it is not renewed, and frees itself one TTL
// after it was granted whether or not anyone calls Release — for code that never
// releases its locks. A waiter that was already watching is granted the lock about
// one TTL after the grant (sub-second TTLs work); one that starts watching later
// waits at most one TTL from then; with nobody waiting the server removes it after
// the TTL rounded up to whole seconds. The holder's Lost closes and Context ends
// (cause ErrLost) when the lease ends; Release before that frees it early.
// Default: locks are renewed until released.
func NoRenew() AcquireOption {
	return func(c *acquireConfig) error {
		c.noRenew = true
		return nil
	}
}

// TTL sets the lock's lease: a holder that stops renewing (it crashed, paused, or
// lost its connection) is superseded by a waiting process within about this time,
// and learns it has lost the lock (Lost) within it on its own clock. A live holder
// renews automatically every third of the lease. Leases below one second work;
// with nobody waiting, the server removes an abandoned lock after the lease rounded
// up to whole seconds (its TTL granularity). Minimum MinTTL (50 ms). Default: the
// Locker's default, DefaultTTL (10 s) unless LockTTL changed it.
func TTL(d time.Duration) AcquireOption {
	return func(c *acquireConfig) error {
		if err := checkTTL("TTL", d); err != nil {
			return err
		}
		c.ttl = d
		return nil
	}
}

// checkTTL checks the lease given to the option called name.
func checkTTL(name string, d time.Duration) error {
	if d < MinTTL {
		return option.Invalid(name, d, "at least MinTTL ("+MinTTL.String()+")")
	}
	return nil
}
