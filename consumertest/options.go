package consumertest

import (
	"time"

	"github.com/workq/workq/consumer"
)

// Option configures the job Work runs and the worker that runs it.
type Option func(*config)

type config struct {
	id, kind    string
	header      [][2]string
	attempt     int
	maxAttempts int
	worker      []consumer.Option
	timeout     time.Duration
}

// DefaultTimeout is how long Work waits for the attempt to be settled by default:
// long enough for any handler meant for a unit test on a loaded machine, short
// enough that a handler that hangs fails its test well before go test's own timeout.
const DefaultTimeout = 10 * time.Second

// ID sets the job id (Job.ID). Default: a generated unique id.
func ID(id string) Option { return func(c *config) { c.id = id } }

// Kind sets the job's kind (Job.Kind), which a consumer.Mux routes on. Default: none;
// WorkArgs sets the args' kind.
func Kind(kind string) Option { return func(c *config) { c.kind = kind } }

// Header adds a header to the job (Job.Header). Default: only the headers workq sets.
func Header(key, value string) Option {
	return func(c *config) { c.header = append(c.header, [2]string{key, value}) }
}

// Attempt runs the job as attempt n (Job.Attempt), as if n-1 earlier attempts had run
// and the last had failed: the job's record says so, with its retry due, and the
// queue's workers' consumer delivers the job n-1 times first (an unfenced worker
// counts deliveries), so the worker counts the attempt as it would in production.
// Default 1. Keep n
// within the attempt limit (MaxAttempts): the attempt that reaches it is the last,
// and a failure then is dead; past it the worker dead-letters the job without
// running it, and Work fails the test.
func Attempt(n int) Option { return func(c *config) { c.attempt = n } }

// MaxAttempts sets the job's own attempt limit (producer.MaxAttempts), which
// overrides the worker's. Default: the worker's, consumer.DefaultMaxAttempts unless
// WorkerOptions sets consumer.MaxAttempts.
func MaxAttempts(n int) Option { return func(c *config) { c.maxAttempts = n } }

// WorkerOptions passes options to the worker (consumer.New), after Work's own: a
// consumer.Logger, consumer.Backoff, consumer.Use, consumer.Unfenced and the like
// apply as they would in production. Work's defaults are a logger that writes to the
// test's log (t.Log) and the worker name "consumertest"; its DrainTimeout is always
// 0, so that the worker stops at once when the attempt is settled (the handler has
// returned by then).
func WorkerOptions(opts ...consumer.Option) Option {
	return func(c *config) { c.worker = append(c.worker, opts...) }
}

// Timeout bounds the wait for the attempt's outcome; past it Work fails the test.
// Default DefaultTimeout.
func Timeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }
