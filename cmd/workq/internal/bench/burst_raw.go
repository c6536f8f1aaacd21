package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
)

// rawBurst is the raw JetStream side of a burst: a queue provisioned as workq does,
// message schedules published to it, and a Consume callback with the workers'
// consumer config that notes each fired message (by its subject, one per job) and
// acks it.
type rawBurst struct {
	env  Env
	raw  *queue.Objects
	cc   jetstream.ConsumeContext
	acks atomic.Int64
	startLog
}

func newRawBurst(ctx context.Context, env Env, n int) (*rawBurst, error) {
	raw, err := rawQueue(ctx, env, "bench-burst-raw")
	if err != nil {
		return nil, err
	}
	b := &rawBurst{env: env, raw: raw, startLog: newStartLog(n)}
	if raw.SchedulesErr != nil {
		cleanupQueue(env.JS, raw.Names)
		return nil, raw.SchedulesErr
	}
	c, err := rawConsumer(ctx, env, raw, 30*time.Second, 10000)
	if err == nil {
		b.cc, err = c.Consume(b.handle)
	}
	if err != nil {
		cleanupQueue(env.JS, raw.Names)
		return nil, err
	}
	return b, nil
}

func (b *rawBurst) handle(m jetstream.Msg) {
	now := time.Now()
	if subj := m.Subject(); subj != b.raw.Names.JobsSubject { // not a probe
		var stored time.Time
		if md, err := m.Metadata(); err == nil {
			stored = md.Timestamp
		}
		b.note(subj, now, stored, time.Time{}, false)
	}
	_ = m.Ack()
	b.acks.Add(1)
}

func (b *rawBurst) enqueue(ctx context.Context, n int, due time.Time) error {
	b.setDue(due)
	return rawPublishScheduled(ctx, b.env.JS, b.raw.Names, n, due)
}

// probe publishes a plain message to the queue's jobs subject (a job to run at once).
func (b *rawBurst) probe(ctx context.Context) error {
	_, err := b.env.JS.Publish(ctx, b.raw.Names.JobsSubject, nil)
	return err
}

func (b *rawBurst) started(ctx context.Context) (first, last, stored time.Time, err error) {
	return b.wait(ctx, nil)
}

func (b *rawBurst) done(ctx context.Context) error {
	if err := waitEmpty(ctx, b.raw.Stream); err != nil {
		return err
	}
	if a := b.acks.Load(); a < int64(b.n) {
		return fmt.Errorf("raw consume acked %d of %d messages", a, b.n)
	}
	return nil
}

func (b *rawBurst) check(time.Time) error { return b.startLog.check() }

func (b *rawBurst) close() error {
	b.cc.Stop()
	cleanupQueue(b.env.JS, b.raw.Names)
	return nil
}
