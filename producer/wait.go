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
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/wireid"
)

// Wait waits until job id has ended and returns its final record: done (with its
// Result), dead or cancelled. It watches the job's key in the records bucket, so it
// returns as soon as the record is written, without polling; a job that retries is
// waited for through its retries.
//
// A job that is neither scheduled, queued nor recorded is ErrNotFound at once, as
// Status says; one whose record is removed while Wait waits (its queue purged) is
// ErrNotFound too. A dead job's record is final until an operator requeues it, which
// starts another run of the same id: a Wait after that waits for the new end. Wait
// ends with ctx's error when ctx ends first. Following (a WaitOption) is told every
// record written before the end: claims, retries, progress.
func (p *Producer) Wait(ctx context.Context, id string, opts ...WaitOption) (*Record, error) {
	var cfg waitConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if ctx == nil {
		return nil, fmt.Errorf("producer: wait for job %s on queue %s: %w", id, p.names.Queue, option.Nil("context"))
	}
	if err := queue.CheckID(id); err != nil {
		return nil, fmt.Errorf("producer: wait on queue %s: %w", p.names.Queue, err)
	}
	fail := func(err error) (*Record, error) {
		return nil, fmt.Errorf("producer: wait for job %s on queue %s: %w", id, p.names.Queue, err)
	}
	// The watch first, so that no write after Status's look is missed.
	reconnected := p.reconnects()
	defer p.js.Conn().RemoveStatusListener(reconnected)
	w, err := p.watchRecord(ctx, id)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	seen := false // a record, or the job's message, was seen
	for {
		var e jetstream.KeyValueEntry
		var ok bool
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-reconnected:
		case e, ok = <-w.Updates():
		}
		if !ok && !p.js.Conn().IsClosed() {
			// Reconnected, or the watch ended while the connection lives: the server
			// may have restarted and lost the watch's consumer. Watch anew (the new
			// watch sends the record as it stands) rather than wait for the old one
			// to notice its missed heartbeats (about 20 s).
			_ = w.Stop()
			if w, err = p.rewatch(ctx, func() (jetstream.KeyWatcher, error) { return p.watchRecord(ctx, id) }); err != nil {
				return fail(err)
			}
			continue
		}
		switch {
		case !ok:
			return fail(errors.New("the watch of its record ended (connection closed)"))
		case e == nil && !seen:
			// The job has no record yet: it must be waiting to start.
			if _, err := p.Status(ctx, id); err != nil {
				return nil, err
			}
			seen = true
		case e == nil:
		case e.Operation() != jetstream.KeyValuePut:
			return fail(fmt.Errorf("%w: its record was removed", ErrNotFound))
		default:
			seen = true
			rec, err := record.Decode(id, e.Value(), e.Revision())
			if err != nil {
				return fail(err)
			}
			if rec.State.Terminal() {
				return publicRecord(rec), nil
			}
			if cfg.follow != nil {
				cfg.follow(publicRecord(rec))
			}
		}
	}
}

// watchRecord starts a watch of job id's record that lives until ctx ends. A user
// whose permissions do not take watches (an old producer role) gets no answer to
// its creation, only a violation on the connection: that ends it at once, with the
// violation, rather than with ctx.
func (p *Producer) watchRecord(ctx context.Context, id string) (jetstream.KeyWatcher, error) {
	nc := p.js.Conn()
	before := nc.LastError()
	wctx, cancel := context.WithCancel(ctx)
	type made struct {
		w   jetstream.KeyWatcher
		err error
	}
	ch := make(chan made, 1)
	go func() {
		w, err := p.records.KV.Watch(wctx, wireid.Encode(id))
		ch <- made{w, err}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case m := <-ch:
			if m.err != nil {
				cancel()
				if denied := retry.Denied(nc, before); denied != nil {
					return nil, denied
				}
				return nil, m.err
			}
			return stopper{m.w, cancel}, nil
		case <-tick.C:
			if denied := retry.Denied(nc, before); denied != nil {
				cancel()
				if m := <-ch; m.w != nil {
					_ = m.w.Stop()
				}
				return nil, denied
			}
		}
	}
}

// stopper is a KeyWatcher whose Stop also ends the context it was made with.
type stopper struct {
	jetstream.KeyWatcher
	cancel context.CancelFunc
}

func (s stopper) Stop() error {
	defer s.cancel()
	return s.KeyWatcher.Stop()
}

// WaitOption sets an option of Wait.
type WaitOption func(*waitConfig)

type waitConfig struct {
	follow func(*Record)
}

// Following has Wait call f with each record of the job written before it ends (its
// claims, retries and progress reports, as Job.Progress writes them: at most one a
// second), starting with the one there is; f runs on Wait's goroutine and delays it.
// By default Wait tells nothing before the end.
func Following(f func(*Record)) WaitOption { return func(c *waitConfig) { c.follow = f } }

// reconnects is a channel told each time the producer's connection is connected
// again after it was lost; remove it with RemoveStatusListener. A watch (Wait,
// WaitWorkflow) started anew then: one whose server restarted lost its consumer, and
// nats.go notices only after two missed heartbeats, some 20 s.
func (p *Producer) reconnects() chan nats.Status {
	return p.js.Conn().StatusChanged(nats.CONNECTED)
}

// rewatch makes a watch of the records anew with watch once their stream answers
// again (within 500 ms a try), trying again while making it fails transiently. The
// watch takes the caller's context, which it lives as long as (nats.go ends a watch
// with the context it was made with): a try's deadline would end it, so the stream is
// asked first, and a watch made on a server not ready yet does not wait out a whole
// request timeout.
func (p *Producer) rewatch(ctx context.Context, watch func() (jetstream.KeyWatcher, error)) (jetstream.KeyWatcher, error) {
	for {
		err := retry.DoEach(ctx, 500*time.Millisecond, func(ctx context.Context) error {
			_, err := p.js.Stream(ctx, "KV_"+p.names.Bucket)
			return err
		})
		if err != nil {
			return nil, err
		}
		w, err := watch()
		if err == nil || !jserr.Transient(err) {
			return w, err
		}
	}
}
