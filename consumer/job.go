package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/wireid"
)

// Job is one delivery of a job to this worker.
type Job struct {
	w           *Worker
	msg         jetstream.Msg
	lease       *lease // keeps the delivery alive; knows its anchor and incarnation
	md          *jetstream.MsgMetadata
	id          string
	kind        string
	maxAttempts int
	attempt     int
	result      []byte
	added       []NewTask       // tasks the run adds to its workflow with its commit (AddTasks); guarded by mu
	progress    *progressReport // the last progress reported and not written yet; guarded by mu
	progressAt  time.Time       // when Progress last wrote the record itself; guarded by mu
	fenced      bool
	recorded    bool          // a workflow's task or a sequence's job (Workq-Workflow, Workq-Sequence): its record exists before its first claim
	enqueue     string        // the enqueue the message belongs to (Workq-Enqueue; "" for a client that sets none)
	run         string        // fenced: this delivery's run id, named by its claim
	token       uint64        // fenced: the revision of this run's claim, its fencing token; 0 before it is written
	retryIn     time.Duration // verdicts watched, early, busy: how long to wait
	unreadable  error         // verdict unreadable: why the value at the job's key is not its record
	unrun       bool          // claimed only to be dead-lettered unrun: its claim's attempt is not counted
	scheduledAt time.Time     // a delayed job's due time, or the time a periodic firing stands for
	enqueuedAt  time.Time     // when the job was enqueued (a delayed job: not when it fired)
	dedup       bool          // its message is one the server's duplicate window applies to (protocol.Delivery.Dedup)
	schedule    string        // the periodic schedule that fired the job
	metrics     *kindMetrics  // the series of this job's queue and kind
	unique      string        // the job's unique key (Workq-Unique), "" if none
	uniqueFor   time.Duration // how long the key stays held after the job ends
	uniqueRev   uint64        // the revision of the key this run holds; 0 if none (unique.go)
	span        *deliverySpan // the delivery's span when the worker traces (Tracing), else nil
	settling    bool          // fenced: its run ended and its settle went to the background

	mu      waitLock
	claim   *record.Record          // fenced: this run's claim as last written (renewals move its revision)
	lost    bool                    // a write over the claim found it taken by another delivery
	lostErr error                   // why: ErrStale, or ErrCancelled when the job was cancelled
	cancel  context.CancelCauseFunc // ends the handler's context; nil before it runs
}

func (w *Worker) newJob(l *lease, md *jetstream.MsgMetadata) *Job {
	msg := l.msg
	h := msg.Headers()
	j := &Job{w: w, msg: msg, lease: l, md: md, kind: h.Get(queue.HeaderKind), enqueue: h.Get(queue.HeaderEnqueue),
		maxAttempts: w.cfg.maxAttempts, recorded: h.Get(queue.HeaderWorkflow) != "" || h.Get(queue.HeaderSequence) != ""}
	j.fenced = !w.cfg.unfenced || j.recorded // always fenced: its record says whom it releases
	if name, at, ok := w.names.Firing(h); ok {
		j.id, j.schedule, j.scheduledAt = schedule.FiringID(name, at), name, at
	} else {
		j.id = w.names.JobID(msg.Subject(), h.Get(queue.HeaderID), md.Sequence.Stream)
		j.scheduledAt = queue.ScheduledAt(h)
		// The server's duplicate window applies to a message whose id is the job's
		// (a producer's enqueue), not to a foreign client's plain publish or a
		// requeued dead letter (an id of its own).
		j.dedup = h.Get(queue.HeaderID) == wireid.Encode(j.id) || h.Get(queue.HeaderNatsScheduler) != ""
	}
	j.enqueuedAt = queue.EnqueuedAt(h, md.Timestamp)
	queue.DropServerHeaders(h) // so neither the handler nor a dead letter sees them
	if len(j.kind) > queue.MaxKindLen {
		j.kind = j.kind[:queue.MaxKindLen] // such a job is dead-lettered before it runs
	}
	j.metrics = w.metrics.kinds.Get(j.kind)
	if k := h.Get(queue.HeaderUnique); k != "" {
		j.unique, j.uniqueFor = k, queue.UniqueFor(h)
	}
	if s := h.Get(queue.HeaderMaxAttempts); s != "" { // most jobs have none: no parse error to allocate
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			j.maxAttempts = n
		}
	}
	j.attempt = int(md.NumDelivered) // unfenced; a fenced claim sets the record's count
	return j
}

// ID is the job id.
func (j *Job) ID() string { return j.id }

// Priority is the job's priority level: 1 (low), 2 (normal, the default), 3 (high)
// or 4 (urgent), from the subject it was enqueued on.
func (j *Job) Priority() int { return j.lease.src.level }

// Kind is the job's kind, "" if it has none.
func (j *Job) Kind() string { return j.kind }

// Payload is the job's data.
func (j *Job) Payload() []byte { return j.msg.Data() }

// Header is the job message's headers.
func (j *Job) Header() nats.Header { return j.msg.Headers() }

// Attempt is this run's number, 1 for the first. Fenced workers count claims in the
// job record: every run is a claim, written before its handler starts, so a run
// whose worker died still counts; a run cut short by a stopping worker is handed back
// and does not. Unfenced workers count JetStream deliveries.
func (j *Job) Attempt() int { return j.attempt }

// MaxAttempts is the attempt limit that applies to this job.
func (j *Job) MaxAttempts() int { return j.maxAttempts }

// ScheduledAt is when a delayed job was due (producer.At, producer.After), or the
// time a periodic schedule's firing stands for; zero for a job enqueued to run at
// once.
func (j *Job) ScheduledAt() time.Time { return j.scheduledAt }

// Schedule is the name of the periodic schedule that fired the job, "" for a job
// that no schedule fired.
func (j *Job) Schedule() string { return j.schedule }

// Sequence is the job message's stream sequence.
func (j *Job) Sequence() uint64 { return j.md.Sequence.Stream }

// EnqueuedAt is when the server stored the job's message: for a delayed or periodic
// job, when it fired. (The job record's enqueued_at says when a delayed job was
// enqueued.)
func (j *Job) EnqueuedAt() time.Time { return j.md.Timestamp }

// FencingToken is the revision of this run's claim on the job record: it grows with
// every claim of the job, so a resource that remembers the highest token it has seen
// can refuse writes from a superseded run. The claim is written before the handler
// starts, so the token is known at once; ctx is unused and kept for callers that
// pass one. The run's renewals (at each heartbeat) move the record's revision past
// the token, and a later claim's token is past them all.
//
// It never returns a token that is not a real claim: ErrStale when another delivery
// has claimed the job since (the run's context then ends with ErrStale too), and
// ErrUnfenced on an unfenced worker.
func (j *Job) FencingToken(ctx context.Context) (uint64, error) {
	if !j.fenced {
		return 0, fmt.Errorf("job %s: %w", j.id, ErrUnfenced)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lost {
		return 0, fmt.Errorf("job %s: fencing token: %w", j.id, j.lostErr)
	}
	return j.token, nil
}

// loseLocked marks the job lost and cancels its handler with cause (ErrStale, or
// ErrCancelled). j.mu is held.
// cancelledRun reports whether the run lost its claim to a cancel of the job.
func (j *Job) cancelledRun() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lost && errors.Is(j.lostErr, ErrCancelled)
}

func (j *Job) loseLocked(cause error) {
	j.lost, j.lostErr = true, cause
	if j.cancel != nil {
		j.cancel(cause)
	}
}

// settle ends the delivery's message as a says (lease.settle); an error (the
// connection is gone) is logged: the job comes back after AckWait, and its record
// decides then.
func (j *Job) settle(a msgAction, delay time.Duration) {
	if err := j.lease.settle(a, delay); err != nil {
		j.w.log.Warn(a.String()+" not sent; the job will be redelivered", "job", j.id, "err", err)
	}
}

// SetResult sets the bytes stored as the job's result when it commits.
func (j *Job) SetResult(b []byte) { j.result = b }

// Fence checks with the server that this run still owns the job: nil if so, ErrStale
// if another delivery has claimed it since (ErrCancelled, which matches ErrStale, if
// it was cancelled). Call it before an irreversible step. The record proves it: only
// this run writes records naming it. Unfenced workers always get nil.
func (j *Job) Fence(ctx context.Context) error {
	if !j.fenced {
		return nil
	}
	j.mu.Lock()
	lost, lostErr := j.lost, j.lostErr
	j.mu.Unlock()
	if lost {
		return fmt.Errorf("job %s: fence: %w", j.id, lostErr)
	}
	rec, err := j.w.records.Get(ctx, j.id)
	if errors.Is(err, record.ErrNotFound) {
		return fmt.Errorf("job %s: record gone: %w", j.id, ErrStale)
	}
	if errors.Is(err, record.ErrCorrupt) {
		// Something that is not this job's record was written over the claim: the
		// claim is gone as surely as if another delivery had taken it.
		return fmt.Errorf("job %s: fence: claim overwritten: %w: %w", j.id, err, ErrStale)
	}
	if err != nil {
		return fmt.Errorf("job %s: fence: %w", j.id, err)
	}
	switch {
	case rec.Run == j.run && rec.State == record.Running:
		return nil
	case isCancelled(j, rec):
		return cancelledError(j)
	}
	return fmt.Errorf("job %s: claimed again by %s (attempt %d): %w", j.id, workerName(rec), rec.Attempt, ErrStale)
}

func workerName(r *record.Record) string {
	if r.Worker == nil {
		return "?"
	}
	return r.Worker.Name
}
