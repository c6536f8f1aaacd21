package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/option"
)

// Result is the outcome of one job of a batch: its JobInfo, or the error that kept
// it from being stored.
type Result struct {
	JobInfo
	Err error
	// Unknown is set with Err when the job's publish was sent but no answer came
	// (the context ended, or the connection failed while it waited): the server may
	// have stored it. A job with Err and not Unknown was not stored. Enqueuing it
	// again under the same id is safe either way within the duplicate window.
	Unknown bool
}

// pending is a publish awaiting its acknowledgement.
type pending struct {
	i    int
	msg  *nats.Msg
	fut  jetstream.PubAckFuture
	sent time.Time
}

// EnqueueBatch publishes jobs pipelined: up to MaxInFlight publishes await their
// acknowledgements at once, and the batch waits for the oldest before sending more,
// so it never outruns the server (the client's stall error never reaches callers).
// A publish that fails transiently or is not acknowledged within AckTimeout is sent
// again, which the job id makes safe.
//
// The results are in the order of jobs. The error is nil when every job was stored
// (or was a duplicate), ErrBatch when some failed, or ctx's error when the context
// ended — jobs whose acknowledgement had not arrived by then carry that error too,
// though the server may have stored them; enqueuing the same batch again is safe.
// A nil ctx is an error, carried by every result, and nothing is sent.
func (p *Producer) EnqueueBatch(ctx context.Context, jobs []Job) ([]Result, error) {
	if ctx == nil {
		err := fmt.Errorf("producer: enqueue batch on queue %s: %w", p.names.Queue, option.Nil("context"))
		res := make([]Result, len(jobs))
		for i := range res {
			res[i].ID, res[i].Err = jobs[i].ID, err
		}
		return res, err
	}
	start := time.Now()
	res := make([]Result, len(jobs))
	defer p.countBatch(start, res)
	window := make([]pending, 0, min(p.cfg.maxInFlight, len(jobs)))
	sent := make([]bool, len(jobs)) // a publish of the job went out
	var uniqs []uniqueJob           // the unique jobs published, with their reservations
	var seqs []seqItem              // the sequences' jobs, enqueued after the others
	failed := 0
	fail := func(i int, err error) {
		res[i].Err = fmt.Errorf("producer: enqueue job %s on queue %s: %w", res[i].ID, p.names.Queue, err)
		failed++
	}

	// resend publishes msg synchronously, retrying while the server is unreachable.
	// The server dedups on the job id, so a duplicate reply may be our own earlier
	// publish: for an id the producer generated it is not reported as a duplicate.
	resend := func(i int, msg *nats.Msg) {
		sent[i] = true
		ack, err := p.publish(ctx, msg)
		if err != nil {
			fail(i, err)
			return
		}
		res[i].Sequence = ack.Sequence
		res[i].Duplicate = ack.Duplicate && jobs[i].ID != ""
	}

	// settle waits for the oldest publish in the window and records its outcome.
	settle := func() {
		pd := window[0]
		window = window[1:]
		timer := time.NewTimer(max(0, p.cfg.ackTimeout-time.Since(pd.sent)))
		defer timer.Stop()
		var err error
		select {
		case ack := <-pd.fut.Ok():
			res[pd.i].Sequence, res[pd.i].Duplicate = ack.Sequence, ack.Duplicate
			return
		case err = <-pd.fut.Err():
		case <-timer.C:
			err = jetstream.ErrAsyncPublishTimeout
		case <-ctx.Done():
			fail(pd.i, ctx.Err())
			return
		}
		if delayed(pd.msg) && jserr.IsConflict(err) {
			ack, err := p.scheduledDuplicate(ctx, pd.msg, err)
			if err != nil {
				fail(pd.i, err)
				return
			}
			res[pd.i].Sequence, res[pd.i].Duplicate = ack.Sequence, true
			return
		}
		if !jserr.Transient(err) && !errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
			fail(pd.i, err)
			return
		}
		resend(pd.i, pd.msg)
	}

	for i := range jobs {
		if ctx.Err() != nil {
			res[i].ID = jobs[i].ID
			fail(i, ctx.Err())
			continue
		}
		j := jobs[i] // a copy: message fills in the generated id
		msg, err := p.message(ctx, &j)
		res[i].ID = j.ID
		if err == nil {
			res[i].ScheduledAt = scheduledAt(msg)
		}
		if err != nil {
			res[i].Err = err
			failed++
			continue
		}
		if j.Sequence != "" {
			// After the loop, in the batch's order: a job takes its place in its
			// sequence when its enqueue writes the key's tail.
			sent[i] = true
			seqs = append(seqs, seqItem{i: i, j: j, msg: msg})
			continue
		}
		if j.Unique != "" {
			r, err := p.reserve(ctx, &j)
			switch {
			case err != nil:
				fail(i, err)
				continue
			case r.holder != "":
				res[i].ID, res[i].Sequence, res[i].Duplicate = r.holder, r.seq, true
				continue
			}
			uniqs = append(uniqs, uniqueJob{i: i, r: r})
		}
		for len(window) >= p.cfg.maxInFlight {
			settle()
		}
		for {
			fut, err := p.publishAsync(ctx, msg)
			if err == nil {
				sent[i] = true
				window = append(window, pending{i: i, msg: msg, fut: fut, sent: time.Now()})
				break
			}
			if errors.Is(err, jetstream.ErrTooManyStalledMsgs) && len(window) > 0 {
				settle() // other publishers share the client's limit: make room and retry
				continue
			}
			if errors.Is(err, jetstream.ErrTooManyStalledMsgs) || jserr.Transient(err) {
				resend(i, msg)
				break
			}
			fail(i, err)
			break
		}
	}
	for len(window) > 0 {
		settle()
	}
	p.enqueueSequencedBatch(ctx, seqs, func(i int, info JobInfo, err error) {
		res[i].JobInfo = info
		if err != nil {
			fail(i, err)
		}
	})
	for _, u := range uniqs {
		if holder := p.settleUnique(ctx, u.r, res[u.i].ID, res[u.i].Err); holder != "" {
			res[u.i].JobInfo = JobInfo{ID: holder, Duplicate: true, ScheduledAt: res[u.i].ScheduledAt}
		}
	}
	for i := range res {
		res[i].Unknown = res[i].Err != nil && sent[i] && !notStored(res[i].Err)
	}
	switch {
	case ctx.Err() != nil && failed > 0:
		return res, fmt.Errorf("producer: batch of %d on queue %s: %d not confirmed: %w", len(jobs), p.names.Queue, failed, ctx.Err())
	case failed > 0:
		return res, fmt.Errorf("producer: batch of %d on queue %s: %d failed: %w", len(jobs), p.names.Queue, failed, ErrBatch)
	}
	return res, nil
}

// uniqueJob is a unique job of a batch, published under its reservation.
type uniqueJob struct {
	i int
	r *reservation
}

// publishAsync sends msg without waiting: through the group writer when there is
// one, else as an async publish. A delayed job is always an async publish: its
// expectation (the id is not scheduled yet) would fail a whole atomic batch.
func (p *Producer) publishAsync(ctx context.Context, msg *nats.Msg) (jetstream.PubAckFuture, error) {
	if p.group != nil && !delayed(msg) {
		return p.group.Go(ctx, msg), nil
	}
	return p.js.PublishMsgAsync(msg)
}

// countBatch updates the metrics once a batch is settled.
func (p *Producer) countBatch(start time.Time, res []Result) {
	p.metrics.batchTime.Observe(time.Since(start).Seconds())
	var stored, dups, failed float64
	for i := range res {
		switch {
		case res[i].Err != nil:
			failed++
		case res[i].Duplicate:
			dups++
		default:
			stored++
		}
	}
	p.metrics.enqueued.Add(stored)
	p.metrics.duplicates.Add(dups)
	p.metrics.errors.Add(failed)
}
