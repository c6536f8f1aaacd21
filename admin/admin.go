package admin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/producer"
)

// Admin administers the workq queues of one JetStream domain and account. It is
// safe for concurrent use.
type Admin struct {
	js jetstream.JetStream

	mu        sync.Mutex
	producers map[string]*producer.Producer // by queue, for the job and schedule calls
}

// New returns an Admin working through js. It does not talk to the server; a nil js
// is an error wrapping ErrInvalidOption.
func New(js jetstream.JetStream) (*Admin, error) {
	if js == nil {
		return nil, fmt.Errorf("admin: %w", option.Nil("JetStream"))
	}
	return &Admin{js: js, producers: map[string]*producer.Producer{}}, nil
}

// names checks a call's context and queue name.
func names(ctx context.Context, name string) (queue.Names, error) {
	if ctx == nil {
		return queue.Names{}, fmt.Errorf("admin: queue %s: %w", name, option.Nil("context"))
	}
	n, err := queue.NamesFor(name)
	if err != nil {
		return n, fmt.Errorf("admin: %w", err)
	}
	return n, nil
}

// jobsStream returns the queue's jobs stream or ErrNoQueue.
func (a *Admin) jobsStream(ctx context.Context, n queue.Names) (jetstream.Stream, error) {
	var s jetstream.Stream
	err := retry.Do(ctx, func(ctx context.Context) error {
		var err error
		s, err = a.js.Stream(ctx, n.Stream)
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("queue %s not found (no stream %s): %w", n.Queue, n.Stream, ErrNoQueue)
	}
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", n.Queue, err)
	}
	return s, nil
}

// Exists returns nil if the queue exists, an error wrapping ErrNoQueue if it does not.
func (a *Admin) Exists(ctx context.Context, name string) error {
	n, err := names(ctx, name)
	if err != nil {
		return err
	}
	_, err = a.jobsStream(ctx, n)
	return err
}

// producer returns a producer of the existing queue name, for the calls that share
// the producer's code (job status, cancel, schedules). It checks that the queue
// exists first, so that it never creates one.
func (a *Admin) producer(ctx context.Context, name string) (*producer.Producer, error) {
	if err := a.Exists(ctx, name); err != nil {
		return nil, err
	}
	a.mu.Lock()
	p := a.producers[name]
	a.mu.Unlock()
	if p != nil {
		return p, nil
	}
	p, err := producer.New(ctx, a.js, name)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if q := a.producers[name]; q != nil {
		return q, nil
	}
	a.producers[name] = p
	return p, nil
}

// forget drops the cached producer of a queue that was deleted.
func (a *Admin) forget(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.producers, name)
}

// eachStream calls fn with the info of every stream that has a subject matching
// subject. A transient error retries the whole listing: reset is called before each
// try, so that fn starts over.
func (a *Admin) eachStream(ctx context.Context, subject string, reset func(), fn func(*jetstream.StreamInfo)) error {
	return retry.Do(ctx, func(ctx context.Context) error {
		reset()
		l := a.js.ListStreams(ctx, jetstream.WithStreamListSubject(subject))
		for si := range l.Info() {
			fn(si)
		}
		return l.Err()
	})
}
