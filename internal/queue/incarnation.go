package queue

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// MetaFirstSeq is the workers' consumer's metadata key holding the stream sequence up
// to which messages may have been delivered by an earlier incarnation of the consumer.
const MetaFirstSeq = "workq_first_seq"

// Incarnation is one life of a queue's workers' consumer. Deleting and re-creating
// the consumer (an operator, a server that lost its state) restarts JetStream's
// delivery counts at 1, so fencing orders deliveries by (Epoch, delivery count), and
// a first delivery may skip reading the job record only if no earlier incarnation can
// have delivered the message: its sequence is above FirstSeq.
type Incarnation struct {
	// Epoch is the consumer's creation time (Unix ns, the server's clock): a
	// re-created consumer has a later one.
	Epoch int64
	// FirstSeq is the last stream sequence that may have been delivered by an earlier
	// incarnation: the stream's last sequence when this one was created, or 0 if
	// nothing had been consumed by then.
	FirstSeq uint64
}

// IncarnationOf reads c's incarnation from its cached info. A consumer that was not
// created by workq has no FirstSeq in its metadata: then the stream's last sequence,
// read now (after the consumer's info), stands in: messages stored later cannot have
// been seen by an earlier incarnation.
func IncarnationOf(ctx context.Context, o *Objects, c jetstream.Consumer) (Incarnation, error) {
	info := c.CachedInfo()
	inc := Incarnation{Epoch: info.Created.UnixNano()}
	if n, err := strconv.ParseUint(info.Config.Metadata[MetaFirstSeq], 10, 64); err == nil {
		inc.FirstSeq = n
		return inc, nil
	}
	si, err := o.Stream.Info(ctx)
	if err != nil {
		return Incarnation{}, fmt.Errorf("stream %s: %w", o.Names.Stream, err)
	}
	inc.FirstSeq = si.State.LastSeq
	return inc, nil
}

// firstSeq is the FirstSeq of a consumer created now on o's stream: 0 if nothing was
// ever consumed (every message the stream stored is still there and no job has a
// record), else the stream's last sequence.
func firstSeq(ctx context.Context, o *Objects) (uint64, error) {
	info, err := o.Stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", o.Names.Stream, err)
	}
	st := info.State
	if st.Msgs != st.LastSeq {
		return st.LastSeq, nil
	}
	if o.Records != nil {
		status, err := o.Records.Status(ctx)
		if err != nil {
			return 0, fmt.Errorf("bucket %s: %w", o.Names.Bucket, err)
		}
		if status.Values() > 0 {
			return st.LastSeq, nil
		}
	}
	return 0, nil
}

// EnsureWorkers creates or checks the workers' consumer (see EnsureConsumer), marking
// a new one with its FirstSeq, and returns it with its incarnation.
func EnsureWorkers(ctx context.Context, o *Objects, want jetstream.ConsumerConfig) (jetstream.Consumer, Incarnation, error) {
	c, err := EnsureConsumer(ctx, o.Stream, want, func(ctx context.Context, cfg *jetstream.ConsumerConfig) error {
		first, err := firstSeq(ctx, o)
		if err != nil {
			return err
		}
		cfg.Metadata = map[string]string{MetaFirstSeq: strconv.FormatUint(first, 10)}
		return nil
	})
	if err != nil {
		return nil, Incarnation{}, err
	}
	inc, err := IncarnationOf(ctx, o, c)
	return c, inc, err
}

// Refresh reads the workers' consumer's incarnation from the server now.
func Refresh(ctx context.Context, o *Objects, c jetstream.Consumer) (Incarnation, error) {
	if _, err := c.Info(ctx); err != nil {
		return Incarnation{}, err
	}
	return IncarnationOf(ctx, o, c)
}
