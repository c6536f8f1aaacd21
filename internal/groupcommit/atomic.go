package groupcommit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxAtomic is the most messages the server takes in one atomic batch.
const MaxAtomic = 1000

// ErrRefused means the server refused an atomic batch as a whole: one of its
// expectations failed (a compare-and-set lost), or the stream takes no batches.
// Nothing of it was stored. The error wraps the server's.
var ErrRefused = errors.New("atomic batch refused")

// Atomic publishes msgs as one atomic batch (ADR-50) and waits for the server's
// answer: every message stored, their sequences returned in order; or none,
// ErrRefused. Any other error leaves the outcome unknown (the reply was lost): the
// caller resolves it by reading. At most MaxAtomic messages.
func Atomic(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) ([]uint64, error) {
	if len(msgs) == 0 || len(msgs) > MaxAtomic {
		return nil, fmt.Errorf("atomic batch of %d messages: 1 to %d", len(msgs), MaxAtomic)
	}
	var a answer
	select {
	case a = <-sendMsgs(ctx, js.Conn(), msgs):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if a.err != nil {
		if errors.Is(a.err, nats.ErrNoResponders) {
			return nil, jetstream.ErrNoStreamResponse
		}
		return nil, a.err
	}
	var r batchReply
	if err := json.Unmarshal(a.reply.Data, &r); err != nil {
		return nil, fmt.Errorf("atomic batch publish: bad reply %q: %w", a.reply.Data, err)
	}
	if r.Error != nil {
		return nil, fmt.Errorf("%w: %w", ErrRefused, r.Error)
	}
	if r.Count != len(msgs) {
		return nil, fmt.Errorf("atomic batch publish: %d of %d messages committed", r.Count, len(msgs))
	}
	seqs := make([]uint64, len(msgs))
	for i := range seqs {
		seqs[i] = r.Sequence - uint64(len(msgs)-1-i)
	}
	return seqs, nil
}
