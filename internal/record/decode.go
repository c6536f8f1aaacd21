package record

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrCorrupt means the value at a job's key is not that job's record. The bucket is
// public (any NATS client with write access can put anything there), so a value may
// be bytes that are not JSON, JSON that is not a record, the record of another job,
// or a record with fields no workq writer makes (a state workq does not know, a
// negative attempt count). Such a value is never taken as the job's state: a reader
// that did could run a job that was done, or commit one job's result as another's.
var ErrCorrupt = errors.New("not a record of this job")

// CorruptError is the error Get returns for a value that is not the job's record:
// which key, at which revision, and what is wrong. It matches ErrCorrupt. Revision
// lets a writer replace the value by compare-and-set on what it read.
type CorruptError struct {
	ID       string
	Revision uint64
	Reason   string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("job record %s at revision %d: %s: %s", e.ID, e.Revision, ErrCorrupt, e.Reason)
}

// Is makes a CorruptError match ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// known are the states a stored record may have (Scheduled is never stored).
var known = map[State]bool{Queued: true, Running: true, Retrying: true, Done: true, Dead: true, Cancelled: true, Waiting: true}

// Decode reads value, stored at revision rev under key id, as id's record. It fails
// with a *CorruptError when value is not JSON of a record, is the record of another
// id, or has a field no workq writer makes.
func Decode(id string, value []byte, rev uint64) (*Record, error) {
	corrupt := func(format string, args ...any) error {
		return &CorruptError{ID: id, Revision: rev, Reason: fmt.Sprintf(format, args...)}
	}
	var r Record
	if err := json.Unmarshal(value, &r); err != nil {
		return nil, corrupt("%d bytes that do not decode as a job record: %v", len(value), err)
	}
	switch {
	case r.ID != id:
		return nil, corrupt("the record of job %.200q", r.ID)
	case !known[r.State]:
		return nil, corrupt("unknown state %.40q", r.State)
	case r.Attempt < 0:
		return nil, corrupt("negative attempt %d", r.Attempt)
	case r.MaxAttempts < 0:
		return nil, corrupt("negative max_attempts %d", r.MaxAttempts)
	case r.LeaseMS < 0:
		return nil, corrupt("negative lease_ms %d", r.LeaseMS)
	}
	r.Revision = rev
	return &r, nil
}
