package admin

import (
	"errors"

	"github.com/workq/workq/producer"
)

// Errors callers can test with errors.Is, besides the producer's (ErrInvalidName,
// ErrInvalidOption), which the job and schedule calls return as the producer does.
var (
	// ErrNoQueue is returned by an operation on a queue whose jobs stream does not
	// exist: no call creates a queue as a side effect.
	ErrNoQueue = errors.New("no such queue")
	// ErrNoDeadLetter is returned when no dead letter matches the selection.
	ErrNoDeadLetter = errors.New("no such dead letter")
	// ErrNoWorkers is returned by SetAckWait, PauseQueue and ResumeQueue when the
	// queue has no workers' consumer yet (no worker has run): there is no AckWait to
	// change and nothing to pause.
	ErrNoWorkers = errors.New("no workers' consumer")
	// ErrNotFound is returned by Job and CancelJob when no job with the id is queued,
	// scheduled or recorded, and by the workflow calls when no task of the workflow
	// is recorded (the producer's ErrNotFound).
	ErrNotFound = producer.ErrNotFound
	// ErrFinished is returned by CancelJob when the job has finished (done or dead)
	// and cannot be cancelled (the producer's ErrFinished).
	ErrFinished = producer.ErrFinished
	// ErrCorruptRecord is returned by Job and CancelJob when the value at the job's
	// key is not its record (another client wrote it), instead of reporting it (the
	// producer's ErrCorruptRecord).
	ErrCorruptRecord = producer.ErrCorruptRecord
)
