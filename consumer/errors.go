package consumer

import (
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/naming"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
)

// Errors callers can test with errors.Is. Those of internal packages are the same
// values as producer's and kvlock's, re-exported so that callers need not import them.
var (
	// ErrInvalidName is returned by New for a queue name workq cannot use.
	ErrInvalidName = naming.ErrInvalid
	// ErrInvalidOption is returned by New for an option given a value it does not
	// take (the error names the option, the value and what it wants), options that
	// contradict each other (a Heartbeat not shorter than AckWait), or a nil context,
	// JetStream or handler.
	ErrInvalidOption = option.ErrInvalid
	// ErrIncompatible is returned by New when the queue or its consumer exists with a
	// configuration this worker cannot use (for example another AckWait).
	ErrIncompatible = queue.ErrIncompatible
	// ErrNeedsCluster is returned by New when Replicas asks for more replicas than the
	// server can place (a single server keeps one).
	ErrNeedsCluster = queue.ErrNeedsCluster
	// ErrNotProvisioned is returned by New when the queue, or one of its consumers,
	// does not exist and the worker's user may not create it; an operator creates the
	// queue first (admin.CreateQueue, 'workq queue create'). The error names what is
	// missing and wraps the server's nats.ErrPermissionViolation.
	ErrNotProvisioned = queue.ErrNotProvisioned

	// ErrStale is returned by Job.Fence, and is the cause a running handler's context
	// ends with, when this run no longer owns the job: another delivery claimed it.
	ErrStale = errors.New("job was reassigned to another worker")
	// ErrCancelled is the cause of a handler's context when its job was cancelled while
	// it ran (producer.Cancel, admin's CancelJob, workq job cancel): the cancel wrote
	// the job's record cancelled, and the worker saw it at its next heartbeat. The
	// error matches ErrStale too: like a superseded run, a cancelled one can commit
	// nothing. The worker drops the job: not committed, not retried, not dead-lettered.
	ErrCancelled = errors.New("job cancelled")
	// ErrPanic wraps a handler's panic as the run's error; its text carries the stack.
	ErrPanic = errors.New("handler panicked")
	// ErrUnknownKind is the permanent error of a job whose kind Mux has no handler for.
	ErrUnknownKind = errors.New("no handler for job kind")
	// ErrMalformed is the permanent error of a job that cannot be run as sent: a
	// payload a typed handler cannot decode (JSON), or headers out of bounds.
	ErrMalformed = errors.New("malformed job payload")
	// ErrExhausted wraps the error of a job's last attempt, when it ran out of
	// attempts and goes to dead letters.
	ErrExhausted = errors.New("attempts exhausted")
	// ErrUnfenced is returned by Job.FencingToken on an unfenced worker, whose jobs
	// have no fencing token.
	ErrUnfenced = errors.New("unfenced worker: no fencing token")
	// ErrCorruptRecord is the cause when the value at a job's key in the records
	// bucket is not the job's record (not JSON, another job's record, a field no workq
	// writer makes): another client wrote it. A fenced worker dead-letters such a job
	// without running it (the dead letter's Workq-Error says what was wrong), and a
	// run whose claim is overwritten by such a value loses it (ErrStale). The same
	// value as producer.ErrCorruptRecord.
	ErrCorruptRecord = record.ErrCorrupt
)

type permanentError struct{ err error }

func (e permanentError) Error() string { return "permanent: " + errText(e.err) }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the job goes to dead letters now.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

type retryAfterError struct {
	d   time.Duration
	err error
}

func (e retryAfterError) Error() string {
	return fmt.Sprintf("retry after %s: %s", e.d, errText(e.err))
}
func (e retryAfterError) Unwrap() error { return e.err }

// RetryAfter fails this attempt and asks for the next one after d instead of the
// backoff's delay (for example a rate limit's Retry-After). Attempts are still counted.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return retryAfterError{max(d, 0), err}
}

func retryDelay(err error) (time.Duration, bool) {
	var r retryAfterError
	if errors.As(err, &r) {
		return r.d, true
	}
	return 0, false
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
