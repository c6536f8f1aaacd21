package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jobid"
)

// EnqueueBatchSameShape is raw JetStream publishing what a workq job is on the wire —
// a subject of its own per job (workq.<queue>.jobs.<id>), the job id as Nats-Msg-Id —
// with PublishAsync, all acks awaited, in rounds like
// EnqueueBatch. Its rate is the RawSame of the batch enqueue scenario: workq over it
// is workq's own overhead, it over the plain raw rate is the price of the job format.
func EnqueueBatchSameShape(ctx context.Context, env Env, n int) (float64, error) {
	js := env.JS
	raw, err := rawQueue(ctx, env, "bench-ebs-raw")
	if err != nil {
		return 0, err
	}
	const round = 10000
	var d time.Duration
	for done := 0; done < n; {
		k := min(n-done, round)
		start := time.Now()
		futs := make([]jetstream.PubAckFuture, 0, k)
		for i := 0; i < k; {
			id := jobid.New()
			m := &nats.Msg{Subject: raw.Names.JobSubject(id), Data: payload}
			f, err := js.PublishMsgAsync(m, jetstream.WithMsgID(id)) // Nats-Msg-Id is queue.HeaderID
			if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				select {
				case <-js.PublishAsyncComplete():
				case <-ctx.Done():
					return 0, ctx.Err()
				}
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("raw publish async: %w", err)
			}
			futs = append(futs, f)
			i++
		}
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return 0, fmt.Errorf("raw publish async: %w", err)
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		d += time.Since(start)
		done += k
	}
	return rate(n, d), nil
}
