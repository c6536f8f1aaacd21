package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/groupcommit"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/workflow"
)

// A batch's sequenced jobs share atomic batches: what one job's enqueue writes (its
// record, its predecessor's successor link, its key's tail), a few hundred jobs at a
// time, with each key's tail threaded through the batch in memory, so that the reads
// go once per key and the server stages one atomic batch for many jobs (on a single
// replica it stages each in a file store of its own, which costs more than the
// writes). A batch the server refuses (a tail moved: another enqueue of a key; an id
// that has a record) is enqueued again job by job, as Enqueue does.

// seqBatchJobs is the most sequenced jobs in one atomic batch: each writes at most two
// messages, and each key one more, under the server's 1000.
const seqBatchJobs = 300

// seqItem is a sequenced job of a batch: its place in the batch, the job and its
// message.
type seqItem struct {
	i   int
	j   Job
	msg *nats.Msg
}

// seqPlanned is what a planned job does after its batch lands.
type seqPlanned struct {
	queued bool   // publish its message: the job before it had ended
	waits  string // tell it if this job, before the batch and outside it, has ended
}

// enqueueSequencedBatch enqueues items, a batch's sequenced jobs in its order, and
// gives each one's outcome to set.
func (p *Producer) enqueueSequencedBatch(ctx context.Context, items []seqItem, set func(i int, info JobInfo, err error)) {
	single := func(items []seqItem) {
		for _, it := range items {
			info, err := p.enqueueInSequence(ctx, &it.j, it.msg)
			set(it.i, info, err)
		}
	}
	if !p.objects.AtomicRecords || !p.objects.RecordTTLs {
		single(items)
		return
	}
	for len(items) > 0 {
		chunk := items[:min(len(items), seqBatchJobs)]
		items = items[len(chunk):]
		if len(chunk) == 1 {
			single(chunk)
			continue
		}
		msgs, planned, err := p.planSequenced(ctx, chunk)
		if err == nil {
			_, err = groupcommit.Atomic(ctx, p.js, msgs)
		}
		if err != nil {
			// Refused, not planned, or its outcome unknown: job by job, each finding
			// its own record if the batch landed after all.
			single(chunk)
			continue
		}
		for k, it := range chunk {
			info, err := JobInfo{ID: it.j.ID, Waiting: true}, error(nil)
			switch pl := planned[k]; {
			case pl.queued:
				// Its record keeps the message: a failed publish is finished by a retry
				// of the enqueue, or by the key's next enqueue.
				if ack, perr := p.publish(ctx, it.msg); perr != nil {
					info, err = JobInfo{ID: it.j.ID}, perr
				} else {
					info = JobInfo{ID: it.j.ID, Sequence: ack.Sequence, Duplicate: ack.Duplicate}
				}
			case pl.waits != "":
				err = p.flows.TellIfEnded(ctx, it.j.Sequence, it.j.ID, pl.waits)
			}
			set(it.i, info, err)
		}
	}
}

// seqKeyState is where a key stands while a batch is planned: its last job (before
// the batch, or the batch's last of the key so far), whether that had not ended,
// whether it died, and the tail's revision read.
type seqKeyState struct {
	last     string
	live     bool
	dead     bool
	tailRev  uint64
	external bool // last is a job from before the batch
}

// errNotPlanned is planSequenced's answer for a chunk it leaves to the job-by-job
// path: a job whose id is its key's tail already (an enqueue of it retried).
var errNotPlanned = errors.New("not planned as a batch")

// planSequenced plans chunk's jobs as one atomic batch: each key's tail and last job
// read once, each job's record (created over nothing: an id that has a record
// refuses the batch), the successor link of the job before it when that has not
// ended, and each key's new tail over the revision read.
func (p *Producer) planSequenced(ctx context.Context, chunk []seqItem) ([]*nats.Msg, []seqPlanned, error) {
	keys := map[string]*seqKeyState{}
	var order []string
	var msgs []*nats.Msg
	planned := make([]seqPlanned, len(chunk))
	for k, it := range chunk {
		key := it.j.Sequence
		st := keys[key]
		if st == nil {
			tail, rev, err := workflow.ReadLink(ctx, p.records, workflow.TailKey(key))
			if err != nil {
				return nil, nil, err
			}
			st = &seqKeyState{tailRev: rev, external: true}
			if tail != nil {
				pred, err := p.records.Get(ctx, tail.Job)
				switch {
				case errors.Is(err, record.ErrNotFound) || errors.Is(err, record.ErrCorrupt):
				case err != nil:
					return nil, nil, err
				default:
					if err := p.finishSequenced(ctx, pred); err != nil {
						return nil, nil, err
					}
					ended, dead, err := p.flows.SequenceEnded(ctx, pred)
					if err != nil {
						return nil, nil, err
					}
					st.last, st.live, st.dead = pred.ID, !ended, dead
				}
			}
			keys[key] = st
			order = append(order, key)
		}
		if st.last == it.j.ID {
			return nil, nil, errNotPlanned
		}
		rec := p.sequenceRecord(&it.j, it.msg)
		halt := !st.live && st.dead && it.j.HaltOnDead
		switch {
		case st.live:
			rec.State, rec.After, rec.WaitingFor = record.Waiting, st.last, []string{st.last}
			link, _ := json.Marshal(workflow.Link{Job: it.j.ID})
			msgs = append(msgs, p.records.KeyMsg(workflow.NextKey(key, st.last), link, 0))
			if st.external {
				planned[k].waits = st.last
			}
		case halt:
			rec.State, rec.After, rec.FailedParents, rec.Halted = record.Waiting, st.last, []string{st.last}, true
		default:
			planned[k].queued = true
			if st.dead {
				rec.FailedParents = []string{st.last} // it died before the batch: this one runs, told so
			}
		}
		if err := workflow.CheckRecordSize(rec, p.js.Conn().MaxPayload()); err != nil {
			return nil, nil, err
		}
		create, err := p.records.WriteMsg(rec, 0)
		if err != nil {
			return nil, nil, err
		}
		msgs = append(msgs, create)
		st.last, st.live, st.dead, st.external = it.j.ID, true, false, false
	}
	for _, key := range order {
		tail, _ := json.Marshal(workflow.Link{Key: key, Job: keys[key].last})
		msgs = append(msgs, p.records.KeyMsg(workflow.TailKey(key), tail, keys[key].tailRev))
	}
	if len(msgs) > groupcommit.MaxAtomic {
		return nil, nil, fmt.Errorf("%w: %d writes", errNotPlanned, len(msgs))
	}
	return msgs, planned, nil
}

// sequenceRecord is the record of sequence job j, whose message is msg, queued with
// its message kept in it (its enqueue makes it wait, or halt).
func (p *Producer) sequenceRecord(j *Job, msg *nats.Msg) *record.Record {
	h := make(nats.Header, len(msg.Header))
	for k, v := range msg.Header {
		if k != queue.HeaderID {
			h[k] = v
		}
	}
	return &record.Record{
		ID: j.ID, Queue: p.names.Queue, Kind: j.Kind, State: record.Queued, MaxAttempts: j.MaxAttempts,
		Enqueue: msg.Header.Get(queue.HeaderEnqueue), EnqueuedAt: time.Now(),
		SequenceKey: j.Sequence, HaltDead: j.HaltOnDead, RunIfFailed: !j.HaltOnDead,
		Message: &record.Message{Subject: msg.Subject, Header: h, Data: msg.Data},
	}
}
