package consumer

import (
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/record"
)

// Errors callers can test with errors.Is.
var (
	// ErrStale: this worker no longer owns the job; another delivery claimed it.
	// Job.Fence returns it, and a running handler's context ends with it as cause.
	ErrStale = errors.New("job was reassigned to another worker")
	// ErrPanic wraps a handler's panic; the error text carries the stack.
	ErrPanic = errors.New("handler panicked")
	// ErrUnknownKind: Mux has no handler for the job's kind. Permanent.
	ErrUnknownKind = errors.New("no handler for job kind")
	// ErrMalformed: the payload could not be decoded (JSON). Permanent.
	ErrMalformed = errors.New("malformed job payload")
	// ErrExhausted: the job ran out of attempts.
	ErrExhausted = errors.New("attempts exhausted")
	// ErrUnfenced: an unfenced worker's job has no fencing token (Job.FencingToken).
	ErrUnfenced = errors.New("unfenced worker: no fencing token")
	// ErrCorruptRecord: the value at a job's key in the records bucket is not the
	// job's record (not JSON, another job's record, a field no workq writer makes):
	// another client wrote it. A fenced worker dead-letters such a job without
	// running it (the dead letter's Workq-Error says what was wrong), and a run whose
	// claim is overwritten by such a value loses it (ErrStale). The same value as
	// producer.ErrCorruptRecord.
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
