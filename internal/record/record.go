// Package record defines the job record — a JSON document per job in the queue's KV
// bucket, key = job id — and the compare-and-set operations that claim and commit it.
// The format is public (docs/wire-format.md, "Job record") so any NATS client can read a job's state.
package record

import (
	"time"
)

// State is where a job stands.
type State string

// The states of a job.
const (
	Queued   State = "queued"   // enqueued, not claimed yet (or given back by a stopping worker)
	Running  State = "running"  // claimed by a worker that is running it
	Retrying State = "retrying" // failed; waits for its next attempt at RetryAt
	Done     State = "done"     // committed: the handler succeeded and its result was stored
	Dead     State = "dead"     // failed for good; a copy is in the dead-letter stream
	// Scheduled: waiting for its time. Never stored: Status reports it for a delayed
	// job, which has no record until it fires and a worker claims it.
	Scheduled State = "scheduled"
	// Cancelled: cancelled before it finished (Cancel); it does not run again, and
	// nothing was committed.
	Cancelled State = "cancelled"
	// Waiting: a workflow's task whose parents have not all ended; it has no message
	// in the queue until the last of them ends (docs/workflows.md).
	Waiting State = "waiting"
)

// Terminal reports whether no more attempts will be made.
func (s State) Terminal() bool { return s == Done || s == Dead || s == Cancelled }

// Worker identifies the worker that claimed a job.
type Worker struct {
	Name string `json:"name"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
}

// Failure is the error of one failed attempt, as the record's history keeps it:
// when the attempt started and ended, on which worker, and its error. Started and
// Worker are missing from the records of workers older than them.
type Failure struct {
	Attempt int       `json:"attempt"`
	Started time.Time `json:"started_at,omitzero"`
	At      time.Time `json:"at"`
	Worker  string    `json:"worker,omitempty"` // the worker's name, at most 64 bytes of JSON
	Error   string    `json:"error"`
}

// MaxErrors is how many failed attempts a record keeps the errors of: the newest.
const MaxErrors = 10

// AddFailure appends the error of a failed attempt to the record's history, dropping
// the oldest past MaxErrors. It copies the history: a record read and written
// again never shares it with the record read.
func (r *Record) AddFailure(f Failure) {
	h := append(make([]Failure, 0, len(r.Errors)+1), r.Errors...)
	h = append(h, f)
	r.Errors = h[max(0, len(h)-MaxErrors):]
}

// Message is the job message of a workflow's task that waits for its parents. It is
// kept in the task's record, not in the queue, until the write that releases the
// task; then it is published onto Subject with the job id as its message id. The
// task's first claim drops it. Keeping it in the record makes the release one write
// and one publish, and a task never released (cancelled, or its enqueue rolled back)
// leaves nothing behind in the queue.
type Message struct {
	Subject string              `json:"subject"`
	Header  map[string][]string `json:"header,omitempty"`
	Data    []byte              `json:"data,omitempty"` // base64 in JSON
}

// Record is one job's state. Field names are the JSON document's keys.
type Record struct {
	ID          string    `json:"id"`
	Queue       string    `json:"queue"`
	Kind        string    `json:"kind,omitempty"`
	State       State     `json:"state"`
	Attempt     int       `json:"attempt"`                // runs started so far, 1 on the first run
	MaxAttempts int       `json:"max_attempts,omitempty"` // the limit that applied to the last run
	Enqueue     string    `json:"enqueue,omitempty"`      // the enqueue this record is of: the Workq-Enqueue header of its messages ("" for a client that sets none)
	Run         string    `json:"run,omitempty"`          // the run that holds the job (running), or made the last claim; random per claim
	LeaseMS     int64     `json:"lease_ms,omitempty"`     // how long, in ms, the run's claim stands without a renewal (the holder's AckWait)
	Sequence    uint64    `json:"sequence"`               // stream sequence of the job message
	Worker      *Worker   `json:"worker,omitempty"`       // who ran the last attempt
	EnqueuedAt  time.Time `json:"enqueued_at,omitzero"`
	StartedAt   time.Time `json:"started_at,omitzero"`   // start of the last attempt
	FinishedAt  time.Time `json:"finished_at,omitzero"`  // when it became done or dead
	RetryAt     time.Time `json:"retry_at,omitzero"`     // when a retrying job is due again
	ScheduledAt time.Time `json:"scheduled_at,omitzero"` // when a delayed job was due, or the time a periodic firing stands for
	Schedule    string    `json:"schedule,omitempty"`    // the periodic schedule that fired the job
	LastError   string    `json:"last_error,omitempty"`
	Errors      []Failure `json:"errors,omitempty"`        // the failed attempts' errors, oldest first; the last MaxErrors
	Progress    float64   `json:"progress,omitempty"`      // what the running attempt reported done, 0 to 1 (Job.Progress)
	ProgressMsg string    `json:"progress_note,omitempty"` // what it said with it
	ProgressAt  time.Time `json:"progress_at,omitzero"`    // when it reported it
	Result      []byte    `json:"result,omitempty"`        // base64 in JSON: what the handler set

	// A workflow's task (docs/workflows.md); all empty for a job outside a workflow.
	Workflow      string   `json:"workflow,omitempty"`             // the workflow's id
	Task          string   `json:"task,omitempty"`                 // the task's name in it; the job id is Workflow + "." + Task
	Parents       []string `json:"parents,omitempty"`              // the tasks it waits for
	Dependents    []string `json:"dependents,omitempty"`           // the tasks that wait for it
	WaitingFor    []string `json:"waiting_for,omitempty"`          // the parents that have not ended yet
	FailedParents []string `json:"failed_parents,omitempty"`       // the parents that ended dead or cancelled
	RunIfFailed   bool     `json:"run_if_parent_failed,omitempty"` // run even when a parent failed (else it is cancelled)
	Message       *Message `json:"message,omitempty"`              // a task's job message until its first claim: published when it is released

	// A job of a sequence (docs/sequences.md); all empty for a job outside one.
	SequenceKey string `json:"sequence_key,omitempty"` // the sequence's key
	After       string `json:"after,omitempty"`        // the job of the key enqueued before it, if that had not ended
	HaltDead    bool   `json:"halt_on_dead,omitempty"` // a predecessor that ends dead halts the key at this job (else it runs)
	Halted      bool   `json:"halted,omitempty"`       // halted: its predecessor ended dead; it waits for an operator's resume

	// StoredAt is when the server stored the message of the record's enqueue (the
	// server's clock, from the delivery that claimed it): an enqueue of the same id
	// stored within the queue's duplicate window of it is a repeat, and never runs,
	// also when a restarted server forgot the message id that would have refused it.
	StoredAt time.Time `json:"stored_at,omitzero"`
	// Ended is the enqueues of this id that the record was of before, oldest first,
	// the last few (protocol.MaxEnded): a copy of any of them ends without running, whatever
	// enqueue the record is of now.
	Ended []string `json:"ended,omitempty"`

	// WrittenAt is when the server stored this revision (the stream leader's clock),
	// as a read reports it; zero for a record not read. A lease is judged by it
	// against the same stream's clock. Not part of the document.
	WrittenAt time.Time `json:"-"`

	// Revision is the KV revision this record was read at or written as; for a claim
	// it is the job's fencing token. Not part of the document.
	Revision uint64 `json:"-"`
}
