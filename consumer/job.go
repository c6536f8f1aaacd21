package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/schedule"
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
	fenced      bool
	retryIn     time.Duration // verdict early: how long until the job's retry time
	unreadable  error         // verdict unreadable: why the value at the job's key is not its record
	scheduledAt time.Time     // a delayed job's due time, or the time a periodic firing stands for
	schedule    string        // the periodic schedule that fired the job
	metrics     *kindMetrics  // the series of this job's queue and kind
	unique      string        // the job's unique key (Workq-Unique), "" if none
	uniqueFor   time.Duration // how long the key stays held after the job ends
	uniqueRev   uint64        // the revision of the key this run holds; 0 if none (unique.go)

	mu      sync.Mutex
	claim   *record.Record          // fenced: this run's claim; Revision 0 until written
	lost    bool                    // a write over the claim found it taken by another delivery
	lostErr error                   // why: ErrStale, or ErrCancelled when the job was cancelled
	twin    bool                    // a delivery of a message this worker finished lately (see twins.go)
	cancel  context.CancelCauseFunc // ends the handler's context; nil before it runs
}

func (w *Worker) newJob(l *lease, md *jetstream.MsgMetadata) *Job {
	msg := l.msg
	h := msg.Headers()
	j := &Job{w: w, msg: msg, lease: l, md: md, kind: h.Get(queue.HeaderKind), maxAttempts: w.cfg.maxAttempts, fenced: !w.cfg.unfenced}
	if name, at, ok := w.names.Firing(h); ok {
		j.id, j.schedule, j.scheduledAt = schedule.FiringID(name, at), name, at
	} else {
		j.id = w.names.JobID(msg.Subject(), h.Get(queue.HeaderID), md.Sequence.Stream)
		j.scheduledAt = queue.ScheduledAt(h)
	}
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
	j.attempt = int(md.NumDelivered) // fenced claims replace it with the record's count
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

// Attempt is this run's number, 1 for the first. Fenced workers count in the job
// record every delivery that may have run — also one whose worker died before it
// wrote anything (the delivery count is the floor) — but not deliveries handed back
// unstarted by a stopping worker; unfenced workers count JetStream deliveries.
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

// EnqueuedAt is when the server stored the job.
func (j *Job) EnqueuedAt() time.Time { return j.md.Timestamp }

// FencingToken is the revision of this run's claim on the job record: it grows with
// every claim of the job, so a resource that remembers the highest token it has seen
// can refuse writes from a superseded run. A first attempt's claim is written lazily
// (see ClaimDelay); the first call writes it if it is not yet, and so may wait on
// the server (bounded by ctx and AckWait).
//
// It never returns a token without an error that is not a real claim: ErrStale when
// another delivery has claimed the job (the run's context then ends with ErrStale
// too), ErrUnfenced on an unfenced worker, or the server's error when the claim could
// not be written.
func (j *Job) FencingToken(ctx context.Context) (uint64, error) {
	if !j.fenced {
		return 0, fmt.Errorf("job %s: %w", j.id, ErrUnfenced)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, j.w.cfg.ackWait)
	defer cancel()
	rev, err := j.ensureClaimed(ctx)
	if err != nil {
		return 0, fmt.Errorf("job %s: fencing token: %w", j.id, err)
	}
	return rev, nil
}

// token is the claim's revision as it stands, without writing anything.
func (j *Job) token() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.claim == nil {
		return 0
	}
	return j.claim.Revision
}

// ensureClaimed writes the claim if it is not written yet and returns its revision.
// If another delivery got there first the job is lost: ErrStale, and the handler's
// context is cancelled.
func (j *Job) ensureClaimed(ctx context.Context) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lost {
		return 0, j.lostErr
	}
	if j.claim.Revision != 0 {
		return j.claim.Revision, nil
	}
	c := *j.claim
	err := j.w.createOver(ctx, j, &c) // over a finished record of an earlier message with this id, too
	if errors.Is(err, record.ErrConflict) {
		j.loseLocked(j.w.lostCause(ctx, j))
		return 0, j.lostErr
	}
	if err != nil {
		return 0, err
	}
	j.claim = &c
	return c.Revision, nil
}

// loseLocked marks the job lost and cancels its handler with cause (ErrStale, or
// ErrCancelled). j.mu is held.
func (j *Job) loseLocked(cause error) {
	j.lost, j.lostErr = true, cause
	if j.cancel != nil {
		j.cancel(cause)
	}
}

// nak puts the delivery back for redelivery after d. The lease stops first: a
// progress report after the nak would move the redelivery to AckWait from then.
func (j *Job) nak(d time.Duration) {
	j.lease.stop()
	if err := j.msg.NakWithDelay(d); err != nil {
		j.w.log.Debug("nak", "job", j.id, "err", err)
	}
}

// term removes the delivery from the queue for good (it is in dead letters).
func (j *Job) term() {
	j.lease.stop()
	if err := j.msg.Term(); err != nil {
		j.w.log.Warn("terminating dead job", "job", j.id, "err", err)
	}
}

// SetResult sets the bytes stored as the job's result when it commits.
func (j *Job) SetResult(b []byte) { j.result = b }

// Fence checks with the server that this run still owns the job: nil if so, ErrStale
// if another delivery has claimed it since. Call it before an irreversible step.
// Unfenced workers always get nil.
func (j *Job) Fence(ctx context.Context) error {
	if !j.fenced {
		return nil
	}
	token, err := j.ensureClaimed(ctx)
	if err != nil {
		return fmt.Errorf("job %s: fence: %w", j.id, err)
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
	if rec.Revision != token && isCancelled(j, rec) {
		return cancelledError(j)
	}
	if rec.Revision != token {
		return fmt.Errorf("job %s: claimed again by %s (attempt %d): %w", j.id, workerName(rec), rec.Attempt, ErrStale)
	}
	return nil
}

func workerName(r *record.Record) string {
	if r.Worker == nil {
		return "?"
	}
	return r.Worker.Name
}
