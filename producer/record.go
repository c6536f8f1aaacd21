package producer

import (
	"time"

	"github.com/workq/workq/internal/record"
)

// Record is a job's record as Status reports it: the JSON document workq keeps per
// job under the job id's token in the queue's bucket WORKQ_<queue>_JOBS (see
// docs/wire-format.md, "Job record"), which any NATS client can read. Its JSON encoding is that
// document's: the field tags are its keys, and empty fields are left out as they are
// there. No field is a pointer: a field a job has not reached yet holds its zero
// value (a zero time, a zero WorkerInfo, 0, "", nil).
type Record struct {
	// ID is the job id, the key of the record and the job's dedup key.
	ID string `json:"id"`
	// Queue is the name of the queue the job is on.
	Queue string `json:"queue"`
	// Kind is the job's kind (EnqueueOption Kind, or JobArgs.Kind), "" if it has none.
	Kind string `json:"kind,omitempty"`
	// State is where the job stands: scheduled, queued, running, retrying, done,
	// dead or cancelled.
	State State `json:"state"`
	// Attempt counts the runs started so far, 1 on the first run, 0 while the job has
	// not run. Runs that left no trace (their worker died before writing anything)
	// count too: every delivery that may have run is an attempt.
	Attempt int `json:"attempt"`
	// MaxAttempts is the attempt limit that applied to the last run: the job's own
	// (EnqueueOption MaxAttempts) or its worker's; 0 while no worker has seen the job
	// and it has no limit of its own.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Enqueue is the enqueue the record is of: the Workq-Enqueue header of the job's
	// messages, a random id the producer stamps on every copy of one enqueue ("" for
	// a client that sets none). A copy of a job whose record has ended, of the same
	// enqueue, never runs; another enqueue of the id runs anew.
	Enqueue string `json:"enqueue,omitempty"`
	// Run is the run that holds the job while it is running, or made the last claim:
	// random per claim. "" before any.
	Run string `json:"run,omitempty"`
	// LeaseMS is how long, in milliseconds, Run's claim stands without a renewal (the
	// holder's AckWait): the holder renews it every heartbeat, and another worker takes
	// the job over only after the record has stood unchanged that long by its own clock.
	LeaseMS int64 `json:"lease_ms,omitempty"`
	// Sequence is the job message's sequence in the queue's stream.
	Sequence uint64 `json:"sequence"`
	// Worker is the worker that ran the last attempt; its zero value (IsZero) means
	// no worker has claimed the job yet.
	Worker WorkerInfo `json:"worker,omitzero"`
	// EnqueuedAt is when the server stored the job; zero if not known.
	EnqueuedAt time.Time `json:"enqueued_at,omitzero"`
	// StartedAt is when the last attempt started; zero before the first.
	StartedAt time.Time `json:"started_at,omitzero"`
	// FinishedAt is when the job became done or dead; zero until then.
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// RetryAt is when a retrying job is due to run again; zero unless it is retrying.
	RetryAt time.Time `json:"retry_at,omitzero"`
	// ScheduledAt is when a delayed job is (or was) due, or the time a periodic
	// schedule's firing stands for; zero for a job enqueued to run at once.
	ScheduledAt time.Time `json:"scheduled_at,omitzero"`
	// Schedule is the name of the periodic schedule that fired the job; "" if none.
	Schedule string `json:"schedule,omitempty"`
	// LastError is the last failure's error text (a panic's includes its stack); ""
	// if no attempt has failed.
	LastError string `json:"last_error,omitempty"`
	// Errors are the errors of the failed attempts, oldest first: the last ten, each
	// cut to 1 KiB (LastError has the last one whole). Runs on an unfenced worker
	// leave none.
	Errors []AttemptError `json:"errors,omitempty"`
	// Progress is how much of the job the running (or last) attempt reported done,
	// 0 to 1 (consumer.Job.Progress); ProgressNote what it said with it, ProgressAt
	// when. Zero if it reported none.
	Progress     float64   `json:"progress,omitempty"`
	ProgressNote string    `json:"progress_note,omitempty"`
	ProgressAt   time.Time `json:"progress_at,omitzero"`
	// Result is what the handler set with Job.SetResult when the job was committed;
	// nil until then, or if it set nothing. Base64 in JSON.
	Result []byte `json:"result,omitempty"`
	// Workflow is the id of the workflow the job is a task of (EnqueueWorkflow); ""
	// for a job outside a workflow. The fields below are empty then too.
	Workflow string `json:"workflow,omitempty"`
	// Task is the job's task name in its workflow.
	Task string `json:"task,omitempty"`
	// Parents are the tasks it depends on (DependsOn).
	Parents []string `json:"parents,omitempty"`
	// Dependents are the tasks that depend on it.
	Dependents []string `json:"dependents,omitempty"`
	// WaitingFor are the parents that have not ended yet, while it is waiting.
	WaitingFor []string `json:"waiting_for,omitempty"`
	// FailedParents are the parents that ended dead or cancelled.
	FailedParents []string `json:"failed_parents,omitempty"`
	// RunIfParentFailed: it runs even when a parent failed (RunIfParentFailed);
	// else it is cancelled then.
	RunIfParentFailed bool `json:"run_if_parent_failed,omitempty"`
	// Message is a waiting task's job message, kept in its record until the task is
	// released (its last parent ended) and dropped by its first claim; nil for every
	// other job.
	Message *TaskMessage `json:"message,omitempty"`
	// SequenceKey is the key of the sequence the job is in (Sequence); "" for a job
	// outside one. The fields below are empty then too.
	SequenceKey string `json:"sequence_key,omitempty"`
	// After is the job of the key enqueued just before it, when that had not ended
	// then: it waited for it to end.
	After string `json:"after,omitempty"`
	// HaltOnDead: a predecessor that ends dead halts the key at this job
	// (HaltOnDead); else the job runs all the same.
	HaltOnDead bool `json:"halt_on_dead,omitempty"`
	// Halted: its predecessor ended dead and the key halted at it; it waits for
	// ResumeSequence.
	Halted bool `json:"halted,omitempty"`
	// StoredAt is when the server stored the message of the record's enqueue, for a
	// message that carried the job id as its message id: another enqueue of the id
	// stored within the queue's duplicate window of it is a repeat, and never runs.
	StoredAt time.Time `json:"stored_at,omitzero"`
	// Ended is the enqueues of the id that the record was of before, oldest first
	// (the last 4): a copy of any of them never runs.
	Ended []string `json:"ended,omitempty"`
	// WrittenAt is when the server stored this revision of the record (its clock, as
	// the read reported it): a running job's lease runs from it. Not part of the
	// JSON document.
	WrittenAt time.Time `json:"-"`
	// Revision is the KV revision the record was read at: for a running job, its
	// claim's fencing token (Job.FencingToken). 0 for a queued job that has no record
	// yet. It is not part of the JSON document (the bucket keeps it beside the value).
	Revision uint64 `json:"-"`
}

// TaskMessage is the job message a waiting workflow task is published with once it
// is released.
type TaskMessage struct {
	// Subject is the job subject it goes onto (its priority level's).
	Subject string `json:"subject"`
	// Header are its headers, workq's and the enqueuer's, less the message id (the
	// job id, set as it is published).
	Header map[string][]string `json:"header,omitempty"`
	// Data is its payload. Base64 in JSON.
	Data []byte `json:"data,omitempty"`
}

// AttemptError is the error of one failed attempt.
type AttemptError struct {
	// Attempt is the attempt's number (Record.Attempt when it ran).
	Attempt int `json:"attempt"`
	// Started is when it started; zero in a record written by an older worker.
	Started time.Time `json:"started_at,omitzero"`
	// At is when it failed.
	At time.Time `json:"at"`
	// Worker is the name of the worker that ran it (at most 64 bytes of it); "" in a
	// record written by an older worker.
	Worker string `json:"worker,omitempty"`
	// Error is its error text.
	Error string `json:"error"`
}

// WorkerInfo identifies a worker. The zero WorkerInfo stands for no worker.
type WorkerInfo struct {
	// Name is the worker's name (consumer.Name; host-pid by default).
	Name string `json:"name"`
	// Host is the host name of the machine the worker ran on.
	Host string `json:"host"`
	// PID is the worker's process id.
	PID int `json:"pid"`
}

// IsZero reports whether w names no worker: the job has not been claimed yet.
func (w WorkerInfo) IsZero() bool { return w == WorkerInfo{} }

// State is where a job stands.
type State string

// The states Status reports.
const (
	// StateQueued: enqueued and not claimed yet, or handed back unstarted by a
	// stopping worker.
	StateQueued State = State(record.Queued)
	// StateRunning: claimed by a worker that is running it.
	StateRunning State = State(record.Running)
	// StateRetrying: an attempt failed; the job runs again at RetryAt.
	StateRetrying State = State(record.Retrying)
	// StateDone: committed; the handler succeeded and its result is stored.
	StateDone State = State(record.Done)
	// StateDead: failed for good; a copy is in the queue's dead letters.
	StateDead State = State(record.Dead)
	// StateScheduled: a delayed job waiting for its time (ScheduledAt).
	StateScheduled State = State(record.Scheduled)
	// StateCancelled: cancelled (Cancel) before it finished; it does not run again,
	// and nothing was committed.
	StateCancelled State = State(record.Cancelled)
	// StateWaiting: a workflow's task waiting for its parent tasks to end.
	StateWaiting State = State(record.Waiting)
)

// States are the states a job can be in, in the order a job goes through them:
// what JobQuery.State takes (besides "").
var States = []State{StateScheduled, StateWaiting, StateQueued, StateRunning, StateRetrying, StateDone, StateDead, StateCancelled}

// Terminal reports whether no more attempts will be made: the job is done, dead
// or cancelled.
func (s State) Terminal() bool { return s == StateDone || s == StateDead || s == StateCancelled }

// publicRecord is r as a Record: the one place the stored record becomes the public
// one.
func publicRecord(r *record.Record) *Record {
	out := &Record{
		ID:          r.ID,
		Queue:       r.Queue,
		Kind:        r.Kind,
		State:       State(r.State),
		Attempt:     r.Attempt,
		MaxAttempts: r.MaxAttempts,
		Enqueue:     r.Enqueue,
		Run:         r.Run,
		LeaseMS:     r.LeaseMS,
		Sequence:    r.Sequence,
		EnqueuedAt:  r.EnqueuedAt,
		StartedAt:   r.StartedAt,
		FinishedAt:  r.FinishedAt,
		RetryAt:     r.RetryAt,
		ScheduledAt: r.ScheduledAt,
		Schedule:    r.Schedule,
		LastError:   r.LastError,
		Errors:      attemptErrors(r.Errors),
		Progress:    r.Progress, ProgressNote: r.ProgressMsg, ProgressAt: r.ProgressAt,
		Result:   r.Result,
		Revision: r.Revision,

		Workflow: r.Workflow, Task: r.Task, Parents: r.Parents, Dependents: r.Dependents,
		WaitingFor: r.WaitingFor, FailedParents: r.FailedParents, RunIfParentFailed: r.RunIfFailed,

		SequenceKey: r.SequenceKey, After: r.After, HaltOnDead: r.HaltDead, Halted: r.Halted,
		StoredAt: r.StoredAt, Ended: r.Ended, WrittenAt: r.WrittenAt,
	}
	if w := r.Worker; w != nil {
		out.Worker = WorkerInfo{Name: w.Name, Host: w.Host, PID: w.PID}
	}
	if m := r.Message; m != nil {
		out.Message = &TaskMessage{Subject: m.Subject, Header: m.Header, Data: m.Data}
	}
	return out
}

// attemptErrors is a record's history of failed attempts as Record has it.
func attemptErrors(fs []record.Failure) []AttemptError {
	if len(fs) == 0 {
		return nil
	}
	out := make([]AttemptError, len(fs))
	for i, f := range fs {
		out[i] = AttemptError(f)
	}
	return out
}
