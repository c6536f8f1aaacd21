package groupcommit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// batchReply is the server's answer to a batch's commit.
type batchReply struct {
	jetstream.PubAck
	Batch string              `json:"batch"`
	Count int                 `json:"count"`
	Error *jetstream.APIError `json:"error,omitempty"`
}

// batch publishes ps as one atomic batch and settles them, reporting true; or, when
// the server refused the batch as a whole (an expectation of one of them failed, or
// the stream takes no batches) before any of them was settled, leaves them unsettled
// and reports false. A batch whose outcome is unknown (no reply) settles every
// publish with that error: each may have been stored, as with a single publish whose
// reply was lost.
//
// Each publish keeps its own deadline. The send slot is held until the reply comes
// or the first of the publishes' contexts ends; from then on, each publish whose
// context ends is settled with its context's error alone, and the others go on
// waiting for the reply off the slot, up to the reply timeout.
// Settling every publish at the earliest deadline made all the writes of a slow batch
// (a restarted, fsync-bound server) ambiguous at once; holding the slot until the
// reply kept a dead server's batch in the way of every later write.
func (w *Writer) batch(ps []*Publish) bool {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Timeout)
	answered := w.sendBatch(ctx, ps)
	wt := newWaiter(ps)
	if a, ok := wt.wait(answered, true); ok {
		defer cancel()
		wt.stop()
		return w.conclude(wt, a)
	}
	go func() {
		defer cancel()
		defer wt.stop()
		if a, ok := wt.wait(answered, false); ok && !w.conclude(wt, a) {
			w.fallbacks.Add(1)
			w.singles(wt.unsettled())
		}
	}()
	return true
}

// answer is the outcome of a batch's commit request.
type answer struct {
	reply *nats.Msg
	err   error
}

// sendBatch sends ps as one atomic batch, the last one as the commit request whose
// answer arrives on the returned channel; ctx bounds the request.
func (w *Writer) sendBatch(ctx context.Context, ps []*Publish) <-chan answer {
	msgs := make([]*nats.Msg, len(ps))
	for i, p := range ps {
		msgs[i] = p.msg
	}
	return sendMsgs(ctx, w.js.Conn(), msgs)
}

// sendMsgs sends msgs as one atomic batch, the last one as the commit request whose
// answer arrives on the returned channel; ctx bounds the request.
func sendMsgs(ctx context.Context, nc *nats.Conn, msgs []*nats.Msg) <-chan answer {
	id := nuid.Next()
	answered := make(chan answer, 1)
	for i, msg := range msgs {
		// A copy carries the batch headers: the caller's message may be in another
		// send at the same time (a publish retried after its context ended).
		m := &nats.Msg{Subject: msg.Subject, Data: msg.Data, Header: maps.Clone(msg.Header)}
		if m.Header == nil {
			m.Header = nats.Header{}
		}
		m.Header.Set(headerBatchID, id)
		m.Header.Set(headerBatchSeq, strconv.Itoa(i+1))
		if i < len(msgs)-1 {
			if err := nc.PublishMsg(m); err != nil {
				answered <- answer{err: err}
				return answered
			}
			continue
		}
		m.Header.Set(headerBatchCommit, "1")
		go func() {
			reply, err := nc.RequestMsgWithContext(ctx, m)
			answered <- answer{reply, err}
		}()
	}
	return answered
}

// waiter tracks the publishes of a batch awaiting its answer, settling each whose
// context ends meanwhile.
type waiter struct {
	ps      []*Publish
	settled []bool
	left    int
	ended   chan struct{}
	stops   []func() bool
}

func newWaiter(ps []*Publish) *waiter {
	wt := &waiter{ps: ps, settled: make([]bool, len(ps)), left: len(ps), ended: make(chan struct{}, 1)}
	for _, p := range ps {
		wt.stops = append(wt.stops, context.AfterFunc(p.ctx, func() {
			select {
			case wt.ended <- struct{}{}:
			default:
			}
		}))
	}
	return wt
}

func (wt *waiter) stop() {
	for _, stop := range wt.stops {
		stop()
	}
}

// wait returns the answer when it arrives. Each publish whose context ends first is
// settled with its context's error; with first, wait returns (not ok) at the first
// such end, and without it, when every publish is settled.
func (wt *waiter) wait(answered <-chan answer, first bool) (answer, bool) {
	for {
		select {
		case a := <-answered:
			return a, true
		case <-wt.ended:
			for i, p := range wt.ps {
				if !wt.settled[i] && p.ctx.Err() != nil {
					wt.settled[i] = true
					wt.left--
					p.settle(nil, p.ctx.Err())
				}
			}
			if first || wt.left == 0 {
				return answer{}, false
			}
		}
	}
}

// unsettled returns the publishes not settled yet.
func (wt *waiter) unsettled() []*Publish {
	var out []*Publish
	for i, p := range wt.ps {
		if !wt.settled[i] {
			out = append(out, p)
		}
	}
	return out
}

// conclude settles the publishes wt has not settled from the batch's answer a; it
// reports false, settling nothing, when the server refused the batch as a whole.
func (w *Writer) conclude(wt *waiter, a answer) bool {
	rest := wt.unsettled()
	fail := func(err error) bool {
		for _, p := range rest {
			p.settle(nil, err)
		}
		return true
	}
	if a.err != nil {
		switch {
		case errors.Is(a.err, nats.ErrNoResponders):
			return fail(jetstream.ErrNoStreamResponse)
		case errors.Is(a.err, context.DeadlineExceeded):
			return fail(nats.ErrTimeout) // the reply timeout, not a caller's deadline
		}
		return fail(a.err)
	}
	var r batchReply
	if err := json.Unmarshal(a.reply.Data, &r); err != nil {
		return fail(fmt.Errorf("atomic batch publish: bad reply %q: %w", a.reply.Data, err))
	}
	if r.Error != nil {
		if r.Error.ErrorCode == errAtomicDisabled {
			w.disabled.Store(true)
		}
		return false
	}
	if r.Count != len(wt.ps) {
		return fail(fmt.Errorf("atomic batch publish: %d of %d messages committed", r.Count, len(wt.ps)))
	}
	// Counted before the publishes are settled: a caller that got its ack sees the
	// batch in Stats (a test read them between the two and found none).
	w.batches.Add(1)
	w.batched.Add(uint64(len(wt.ps)))
	// The batch's messages are stored one after the other, the commit last.
	first := r.Sequence - uint64(len(wt.ps)) + 1
	for i, p := range wt.ps {
		if !wt.settled[i] {
			p.settle(&jetstream.PubAck{Stream: r.Stream, Sequence: first + uint64(i), Domain: r.Domain}, nil)
		}
	}
	return true
}
