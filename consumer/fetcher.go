package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fetcher is the worker goroutines' shared pull iterator. It reopens the iterator
// when the consumer was deleted (a server that lost its state, an operator) and
// keeps going through reconnects, which the iterator handles itself.
type fetcher struct {
	w   *Worker
	mu  sync.Mutex
	it  jetstream.MessagesContext
	gen int
}

func (f *fetcher) open(ctx context.Context) error {
	it, err := f.w.consumer.Messages(jetstream.PullMaxMessages(f.w.cfg.concurrency))
	if err != nil {
		return fmt.Errorf("consumer: queue %s: pull: %w", f.w.names.Queue, err)
	}
	f.mu.Lock()
	f.it = it
	f.gen++
	f.mu.Unlock()
	return nil
}

// next returns the next delivery, or an error when ctx ends or the connection is
// closed for good.
func (f *fetcher) next(ctx context.Context) (jetstream.Msg, error) {
	delay := 10 * time.Millisecond
	for {
		f.mu.Lock()
		it, gen := f.it, f.gen
		f.mu.Unlock()
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err == nil {
			return msg, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, jetstream.ErrConnectionClosed) || f.w.js.Conn().IsClosed() {
			return nil, err
		}
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
			errors.Is(err, jetstream.ErrConsumerNotFound) {
			if rerr := f.reopen(ctx, gen); rerr != nil && ctx.Err() == nil {
				f.w.log.Warn("reopening the pull failed; retrying", "err", rerr)
			}
		} else {
			f.w.log.Debug("pull", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// reopen recreates the consumer if needed and a new iterator, once per generation.
func (f *fetcher) reopen(ctx context.Context, gen int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen != gen {
		return nil // another goroutine reopened it already
	}
	f.it.Stop()
	c, err := f.w.ensureConsumer(ctx)
	if err != nil {
		return err
	}
	f.w.consumer = c
	it, err := c.Messages(jetstream.PullMaxMessages(f.w.cfg.concurrency))
	if err != nil {
		return err
	}
	f.it = it
	f.gen++
	f.w.log.Info("pull reopened")
	return nil
}

// drain stops pulling and hands back the deliveries already buffered.
func (f *fetcher) drain(w *Worker) {
	f.mu.Lock()
	it := f.it
	f.mu.Unlock()
	it.Drain()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		msg, err := it.Next(jetstream.NextContext(ctx))
		cancel()
		if err != nil {
			return
		}
		w.handBack(msg)
	}
}

func (f *fetcher) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.it.Stop()
}
