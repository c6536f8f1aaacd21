package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// One worker running one job at a time runs first deliveries in the order they
// were enqueued: jobs queued before it started, and jobs enqueued while it runs,
// in batches and one by one. (Retries, several workers or Concurrency > 1 do not
// keep this order; docs/guarantees.md says so.)
func TestFirstDeliveriesRunInEnqueueOrder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts []consumer.Option
	}{
		{"fenced", nil},
		{"unfenced", []consumer.Option{consumer.Unfenced()}},
		{"prefetch 50", []consumer.Option{consumer.Prefetch(50)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t)
			js := env.JetStream(t)
			const q = "fifo"
			p := newProducer(t, js, q)
			var mu sync.Mutex
			var ran []string
			var late []string
			w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
				mu.Lock()
				defer mu.Unlock()
				ran = append(ran, j.ID())
				if j.Attempt() != 1 {
					late = append(late, fmt.Sprintf("%s (attempt %d)", j.ID(), j.Attempt()))
				}
				return nil
			}), append([]consumer.Option{consumer.Concurrency(1)}, c.opts...)...)

			var want []string
			want = append(want, enqueueN(t, p, 500, "before")...) // queued before the worker starts
			runWorker(t, w)
			ctx := testenv.Context(t, 30*time.Second)
			for i := range 3 { // while it runs: batches and single jobs
				want = append(want, enqueueN(t, p, 300, fmt.Sprintf("batch%d", i))...)
				for k := range 20 {
					id := fmt.Sprintf("single%d-%d", i, k)
					if _, err := p.Enqueue(ctx, []byte(id), producer.ID(id)); err != nil {
						t.Fatal(err)
					}
					want = append(want, id)
				}
			}
			testenv.Eventually(t, 30*time.Second, "every job to run", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(ran) >= len(want)
			})
			mu.Lock()
			defer mu.Unlock()
			if len(late) > 0 {
				t.Fatalf("redeliveries in a run without failures: %v", late)
			}
			if len(ran) != len(want) {
				t.Fatalf("%d runs, want %d", len(ran), len(want))
			}
			for i := range want {
				if ran[i] != want[i] {
					t.Fatalf("run %d was %s, want %s (enqueued %d); runs %d to %d: %v", i, ran[i], want[i], i, max(i-3, 0), min(i+3, len(ran)), ran[max(i-3, 0):min(i+4, len(ran))])
				}
			}
		})
	}
}
