package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/groupcommit"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/wireid"
	"github.com/workq/workq/internal/workflow"
)

// Sequence puts the job in the sequence of key: the jobs enqueued with one key run
// one at a time, across every worker of the queue, in the order they were enqueued
// (docs/sequences.md). A job waits for the one before it to end (committed, dead or
// cancelled) without taking a worker's slot, counting an attempt or polling. Any text
// a user has is a key (a customer id, an e-mail address, a URL): 1 to 200 bytes of
// UTF-8 without control characters. Jobs of different keys run in parallel. A
// sequence's job cannot be delayed or unique.
func Sequence(key string) EnqueueOption { return func(j *Job) { j.Sequence = key } }

// HaltOnDead halts the job's sequence at it when the job before it ends dead: it
// waits, and the jobs after it behind it, until ResumeSequence (admin, 'workq
// sequence resume'). Without it a job runs after the one before it whatever its end.
func HaltOnDead() EnqueueOption { return func(j *Job) { j.HaltOnDead = true } }

// ErrNotHalted is returned by ResumeSequence for a key no job of which is halted.
var ErrNotHalted = errors.New("sequence not halted")

// checkSequence checks a job's sequence options.
func checkSequence(j *Job) error {
	switch {
	case j.Sequence == "" && j.HaltOnDead:
		return option.Invalid("HaltOnDead", true, "Sequence beside it")
	case j.Sequence == "":
		return nil
	case wireid.Check("sequence key", j.Sequence) != nil:
		return option.Invalid("Sequence", j.Sequence, "1 to 200 bytes of UTF-8 without control characters")
	case !j.At.IsZero():
		return option.Invalid("At", j.At, "none with Sequence: a sequence's job takes its place when it is enqueued")
	case j.Unique != "":
		return option.Invalid("Unique", j.Unique, "none with Sequence")
	}
	return nil
}

// maxSequenceRounds bounds the tries of one sequenced enqueue against others of the
// same key: each try that loses a compare-and-set lost it to another enqueue that
// went through, waits a random while (up to 16 ms, growing) and reads again.
const maxSequenceRounds = 1000

// enqueueInSequence enqueues j, whose message is msg, as the last job of its
// sequence. One atomic batch of the records bucket writes the key's tail (by
// compare-and-set on the tail read), the job's record and, when the job before it has
// not ended, that job's successor link: the new job then waits for it, its message
// kept in its record, and is released by that job's end. Otherwise the record is
// queued and the message published. Concurrent enqueues of one key are ordered by
// the tail's compare-and-set.
func (p *Producer) enqueueInSequence(ctx context.Context, j *Job, msg *nats.Msg) (JobInfo, error) {
	if !p.objects.AtomicRecords || !p.objects.RecordTTLs {
		return JobInfo{ID: j.ID}, errors.New("the queue's records bucket takes no atomic batches or no TTL per write (nats-server 2.12 or later, and a user who may update the bucket, are needed once)")
	}
	key, tailKey := j.Sequence, workflow.TailKey(j.Sequence)
	tailValue, _ := json.Marshal(workflow.Link{Key: key, Job: j.ID})
	nextValue, _ := json.Marshal(workflow.Link{Job: j.ID})
	for round := range maxSequenceRounds {
		if round > 0 {
			wait := time.Duration(rand.Int64N(int64(time.Millisecond) << min(round, 4)))
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return JobInfo{ID: j.ID}, ctx.Err()
			}
		}
		tail, tailRev, err := workflow.ReadLink(ctx, p.records, tailKey)
		if err != nil {
			return JobInfo{ID: j.ID}, err
		}
		var pred *record.Record
		if tail != nil {
			if tail.Job == j.ID {
				return p.sequencedDuplicate(ctx, j.ID)
			}
			pred, err = p.records.Get(ctx, tail.Job)
			switch {
			case errors.Is(err, record.ErrNotFound) || errors.Is(err, record.ErrCorrupt):
				pred = nil // expired or removed: ended long ago
			case err != nil:
				return JobInfo{ID: j.ID}, err
			}
		}
		if pred != nil {
			if err := p.finishSequenced(ctx, pred); err != nil {
				return JobInfo{ID: j.ID}, err
			}
		}
		rec := p.sequenceRecord(j, msg)
		live, halt, died := false, false, false
		if pred != nil {
			ended, dead, err := p.flows.SequenceEnded(ctx, pred)
			if err != nil {
				return JobInfo{ID: j.ID}, err
			}
			live, died = !ended, ended && dead
			halt = died && j.HaltOnDead
		}
		switch {
		case live:
			rec.State, rec.After, rec.WaitingFor = record.Waiting, pred.ID, []string{pred.ID}
		case halt:
			// The key's last job died, and this one halts then: as if told.
			rec.State, rec.After, rec.FailedParents, rec.Halted = record.Waiting, pred.ID, []string{pred.ID}, true
		case died:
			// It died before this one was enqueued: this one runs, told so (Job.FailedParents).
			rec.FailedParents = []string{pred.ID}
		}
		if err := workflow.CheckRecordSize(rec, p.js.Conn().MaxPayload()); err != nil {
			return JobInfo{ID: j.ID}, fmt.Errorf("%w: a sequence's job keeps its message in its record while it waits: %w", ErrPayloadTooLarge, err)
		}
		msgs := []*nats.Msg{p.records.KeyMsg(tailKey, tailValue, tailRev)}
		if live {
			msgs = append(msgs, p.records.KeyMsg(workflow.NextKey(key, pred.ID), nextValue, 0))
		}
		create, err := p.records.CreateMsg(ctx, rec)
		if errors.Is(err, record.ErrConflict) {
			return p.sequencedDuplicate(ctx, j.ID)
		}
		if err != nil {
			return JobInfo{ID: j.ID}, err
		}
		if p.workflowStep != nil {
			if err := p.workflowStep("sequence-batch", round); err != nil {
				return JobInfo{ID: j.ID}, err
			}
		}
		_, err = groupcommit.Atomic(ctx, p.js, append(msgs, create))
		if errors.Is(err, groupcommit.ErrRefused) {
			continue // another enqueue of the key, or the job before, moved: read again
		}
		if err != nil {
			// The batch's outcome is not known (its reply was lost): its record says.
			cur, gerr := p.records.Get(ctx, j.ID)
			switch {
			case errors.Is(gerr, record.ErrNotFound):
				continue
			case gerr != nil:
				return JobInfo{ID: j.ID}, errors.Join(err, gerr)
			case cur.Enqueue != rec.Enqueue:
				return p.sequencedDuplicate(ctx, j.ID)
			}
		}
		switch {
		case live:
			// The job before may have ended between the read and the batch: its end
			// found no successor then, so this enqueue tells the new job.
			return JobInfo{ID: j.ID, Waiting: true}, p.flows.TellIfEnded(ctx, key, j.ID, pred.ID)
		case halt:
			return JobInfo{ID: j.ID, Waiting: true}, nil
		}
		if p.workflowStep != nil {
			if err := p.workflowStep("sequence-publish", round); err != nil {
				return JobInfo{ID: j.ID}, err
			}
		}
		ack, err := p.publish(ctx, msg)
		if err != nil {
			// The record keeps the message: this enqueue retried, or the key's next
			// enqueue, publishes it.
			return JobInfo{ID: j.ID}, err
		}
		return JobInfo{ID: j.ID, Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
	}
	return JobInfo{ID: j.ID}, fmt.Errorf("sequence %q: its tail kept changing", key)
}

// finishSequenced finishes, for the key's new enqueue, what an enqueue of rec (the
// key's last job) that died may have left undone: a queued job whose message was
// never published, or a waiting job whose predecessor ended before it was linked. An
// enqueue that lives does both within its acknowledgement timeout, so a younger
// record is left to it.
func (p *Producer) finishSequenced(ctx context.Context, rec *record.Record) error {
	if time.Since(rec.EnqueuedAt) < p.cfg.ackTimeout || rec.Attempt > 0 {
		return nil
	}
	_, err := p.flows.FinishEnqueue(ctx, rec)
	return err
}

// sequencedDuplicate answers a sequenced enqueue whose job id has a record: the job
// was enqueued before (by this enqueue, retried, or another). What an enqueue of it
// that failed may have left undone is finished now (workflow.Releaser.FinishEnqueue).
func (p *Producer) sequencedDuplicate(ctx context.Context, id string) (JobInfo, error) {
	rec, err := p.records.Get(ctx, id)
	if err != nil {
		return JobInfo{ID: id}, err
	}
	if rec.Attempt == 0 && rec.SequenceKey != "" {
		if _, err := p.flows.FinishEnqueue(ctx, rec); err != nil {
			return JobInfo{ID: id}, err
		}
	}
	return JobInfo{ID: id, Sequence: rec.Sequence, Duplicate: true, Waiting: rec.State == record.Waiting}, nil
}
