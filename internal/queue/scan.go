package queue

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Scan reads the messages of stream s present when it starts, oldest first, with an
// ordered consumer (one request per 1024 messages), calling fn on each until fn
// returns false. headersOnly leaves the payloads out. An ordered consumer needs a
// stream without WorkQueue retention: the dead letters, a KV bucket's stream.
func Scan(ctx context.Context, s jetstream.Stream, headersOnly bool, fn func(jetstream.Msg, *jetstream.MsgMetadata) bool) error {
	return ScanFrom(ctx, s, 0, headersOnly, fn)
}

// ScanFrom is Scan from stream sequence from on (0 or 1: from the first message).
func ScanFrom(ctx context.Context, s jetstream.Stream, from uint64, headersOnly bool, fn func(jetstream.Msg, *jetstream.MsgMetadata) bool) error {
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs == 0 || from > info.State.LastSeq {
		return nil
	}
	last := info.State.LastSeq
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: headersOnly}
	if from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	c, err := s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	for {
		batch, err := c.Fetch(1024, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			if md.Sequence.Stream > last || !fn(m, md) || md.NumPending == 0 || md.Sequence.Stream == last {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if got == 0 {
			return nil // nothing more arrived within the wait
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
