package consumer_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/testenv"
)

// takeDelivery fetches the queue's next job from the workers' consumer as a worker
// would and leaves it unacknowledged: the test plays a worker that dies at a moment
// of its choosing. It returns the delivery and the enqueue it belongs to (its
// Workq-Enqueue), which the records a worker writes for it name.
func takeDelivery(t *testing.T, js jetstream.JetStream, q string) (jetstream.Msg, string) {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	c, err := js.Consumer(ctx, "WORKQ_"+q, "workers")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range b.Messages() {
		return m, m.Headers().Get("Workq-Enqueue")
	}
	t.Fatalf("no job to take from %s: %v", q, b.Error())
	return nil, ""
}

// writeRecord writes a job record as a worker would (docs/wire-format.md),
// whatever the key holds.
func writeRecord(t *testing.T, js jetstream.JetStream, q, id string, rec map[string]any) {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, id, b); err != nil {
		t.Fatal(err)
	}
}

// runLog records handler runs per job: when each started and with which attempt.
type runLog struct {
	mu       sync.Mutex
	attempts map[string][]int
	starts   map[string][]time.Time
}

func (r *runLog) add(id string, attempt int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.attempts == nil {
		r.attempts, r.starts = map[string][]int{}, map[string][]time.Time{}
	}
	r.attempts[id] = append(r.attempts[id], attempt)
	r.starts[id] = append(r.starts[id], time.Now())
}

func (r *runLog) runs(id string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.attempts[id]...)
}

func (r *runLog) startTimes(id string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.starts[id]...)
}
