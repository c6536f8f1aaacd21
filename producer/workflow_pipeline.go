package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
)

// workflowWindow is how many of EnqueueWorkflow's writes await their acknowledgement
// at once. Pipelined, a workflow's records and roots go out at the rate of
// EnqueueBatch; 64 synchronous writes at a time took 2.3 times as long.
const workflowWindow = 256

// sendEach sends, for each task of plan, the message msgFor returns (nil: nothing to
// send for that task), with up to workflowWindow awaiting their acknowledgement at
// once, and gives settle each one's outcome: the acknowledgement, or the error of a
// publish that failed, timed out or went unanswered. It returns the first error
// settle returns (or a failed msgFor's, or ctx's); after one, or once ctx ends, no
// more messages go out, and those under way are settled from their answers (within
// the ack timeout, whatever ctx), so that what was written is known when it returns.
func (p *Producer) sendEach(ctx context.Context, plan []plannedTask, step string,
	msgFor func(t plannedTask) (*nats.Msg, error),
	settle func(ctx context.Context, t plannedTask, msg *nats.Msg, ack *jetstream.PubAck, err error) error,
) error {
	var first error
	window := make([]pending, 0, min(workflowWindow, len(plan)))
	wait := func() {
		pd := window[0]
		window = window[1:]
		timer := time.NewTimer(max(0, p.cfg.ackTimeout-time.Since(pd.sent)))
		defer timer.Stop()
		var ack *jetstream.PubAck
		var err error
		// Not cut short by ctx: the answer says whether the write landed, which the
		// removal of a failed enqueue needs to know; the ack timeout bounds it.
		select {
		case ack = <-pd.fut.Ok():
		case err = <-pd.fut.Err():
		case <-timer.C:
			err = jetstream.ErrAsyncPublishTimeout
		}
		if err = settle(ctx, plan[pd.i], pd.msg, ack, err); err != nil && first == nil {
			first = fmt.Errorf("task %s: %w", plan[pd.i].rec.Task, err)
		}
	}
	for i, t := range plan {
		if first != nil || ctx.Err() != nil {
			break
		}
		var err error
		if p.workflowStep != nil {
			err = p.workflowStep(step, i)
		}
		var msg *nats.Msg
		if err == nil {
			msg, err = msgFor(t)
		}
		if err != nil {
			first = fmt.Errorf("task %s: %w", t.rec.Task, err)
			break
		}
		if msg == nil {
			continue
		}
		for len(window) >= workflowWindow {
			wait()
		}
		fut, err := p.js.PublishMsgAsync(msg)
		if err != nil {
			// The connection's async window is full (another publisher shares it) or
			// it is closed: settle this one as a failed publish, which resends it.
			if err = settle(ctx, t, msg, nil, err); err != nil && first == nil {
				first = fmt.Errorf("task %s: %w", t.rec.Task, err)
			}
			continue
		}
		window = append(window, pending{i: i, msg: msg, fut: fut, sent: time.Now()})
	}
	for len(window) > 0 {
		wait()
	}
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// lostOrRefused reports whether a pipelined publish's error leaves its outcome to be
// found out by sending it again: the server was unreachable or slow, or the
// connection's async window was full.
func lostOrRefused(err error) bool {
	return jserr.Transient(err) || errors.Is(err, jetstream.ErrAsyncPublishTimeout) || errors.Is(err, jetstream.ErrTooManyStalledMsgs)
}
