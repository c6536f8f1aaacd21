package producer

import (
	"errors"

	"github.com/workq/workq/internal/naming"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/schedule"
)

// Errors callers can test with errors.Is. Those of internal packages are the same
// values as consumer's and kvlock's, re-exported so that callers need not import them.
var (
	// ErrInvalidName is returned for a queue name, job id, unique key or schedule name
	// workq cannot use; the error says what is wrong with it.
	ErrInvalidName = naming.ErrInvalid
	// ErrInvalidOption is returned for an option given a value it does not take (the
	// error names the option, the value and what it wants), or a nil context or
	// JetStream.
	ErrInvalidOption = option.ErrInvalid
	// ErrIncompatible is returned by New when the queue exists with a configuration
	// workq cannot use.
	ErrIncompatible = queue.ErrIncompatible
	// ErrNeedsCluster is returned by New when Replicas asks for more replicas than the
	// server can place (a single server keeps one).
	ErrNeedsCluster = queue.ErrNeedsCluster
	// ErrNotProvisioned is returned by New when the queue does not exist and the
	// producer's user may not create it; an operator creates the queue first
	// (admin.CreateQueue, 'workq queue create'). The error wraps the server's
	// nats.ErrPermissionViolation.
	ErrNotProvisioned = queue.ErrNotProvisioned
	// ErrPayloadTooLarge is returned by an enqueue whose job's payload and headers do
	// not fit in the server's max payload less DeadLetterReserve.
	ErrPayloadTooLarge = errors.New("job too large for the server's max payload")
	// ErrNotFound is returned by Status and Cancel when no job with the id is
	// scheduled, queued or recorded.
	ErrNotFound = errors.New("job not found")
	// ErrBatch is returned by EnqueueBatch when some jobs of the batch failed; each
	// Result says which and why.
	ErrBatch = errors.New("some jobs of the batch failed")
	// ErrCorruptRecord is returned by Status and Cancel when the value at the job's
	// key in the records bucket is not the job's record (not JSON, another job's
	// record, a field no workq writer makes): another client wrote it. The error names
	// the key, the revision and what is wrong, rather than report such a value as the
	// job's state. The same value as consumer.ErrCorruptRecord.
	ErrCorruptRecord = record.ErrCorrupt
	// ErrFinished is returned by Cancel when the job has finished, done or dead: there
	// is nothing left to cancel. The error names its state.
	ErrFinished = errors.New("job has finished")
	// ErrNilArgs is returned by EnqueueArgs and NewJob for a nil JobArgs (or a nil
	// pointer), whose JSON would be null: a job no typed handler can use. Like every
	// nil argument, the error also wraps ErrInvalidOption.
	ErrNilArgs = errors.New("nil job args")

	// ErrInvalidSchedule is returned for a schedule spec workq cannot read, a time
	// zone the server would not know, or an interval shorter than a second. The error
	// says what is wrong.
	ErrInvalidSchedule = schedule.ErrInvalid
	// ErrScheduleNotFound is returned when no periodic schedule of that name is on
	// the queue.
	ErrScheduleNotFound = errors.New("schedule not found")
	// ErrNoSchedules is returned when the queue cannot keep schedules (a server older
	// than 2.12, or a stream the user may not update to take them).
	ErrNoSchedules = queue.ErrNoSchedules
)
