package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/queue"
)

// Priorities times a fenced workq worker draining n jobs spread evenly over the four
// priority levels against the same worker draining n jobs of the normal level alone,
// on queues provisioned alike: the cost of taking jobs from four consumers in
// priority order rather than from one. Both columns are workq's: Workq is the mix,
// Raw the single level.
func Priorities(ctx context.Context, env Env, n, concurrency int) (Pair, error) {
	res := Pair{Scenario: fmt.Sprintf("process 4 priority levels vs 1 (workq, fenced c=%d)", concurrency), N: n}
	opts := env.workerOpts(consumer.Concurrency(concurrency), consumer.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	var err error
	if res.Raw, err = drain(ctx, env, queueName("bench-pr-one"), n, []int{queue.PriorityNormal}, opts); err != nil {
		return res, err
	}
	res.Workq, err = drain(ctx, env, queueName("bench-pr-mix"), n, queue.Levels, opts)
	return res, err
}
