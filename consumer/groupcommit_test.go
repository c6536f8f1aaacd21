package consumer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// batchHeaders lists h's atomic-batch headers.
func batchHeaders(h nats.Header) []string {
	var got []string
	for k := range h {
		if strings.HasPrefix(k, "Nats-Batch-") {
			got = append(got, k)
		}
	}
	return got
}

// Jobs enqueued in atomic batches are stored with the batch's headers. A handler
// never sees them, and a dead letter never carries them: a copy with them would be
// taken by the server for part of a batch and refused, and the job would never end.
// With group commit on, the worker's own record writes go out in batches too.
func TestBatchEnqueuedJobsEndWithoutBatchHeaders(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q, n = "gcdead", 200
	p := newProducer(t, js, q, producer.GroupCommit(true))
	jobs := make([]producer.Job, n)
	for i := range jobs {
		jobs[i].Payload = []byte("x")
	}
	if _, err := p.EnqueueBatch(testenv.Context(t, 20*time.Second), jobs); err != nil {
		t.Fatal(err)
	}
	// The test is only meaningful if some jobs were stored by a batch.
	ctx := testenv.Context(t, 20*time.Second)
	s, err := js.Stream(ctx, "WORKQ_"+q)
	if err != nil {
		t.Fatal(err)
	}
	batched := 0
	for seq := uint64(1); seq <= n; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if len(batchHeaders(m.Header)) > 0 {
			batched++
		}
	}
	if batched == 0 {
		t.Fatal("no job was stored by an atomic batch: group commit did not batch the enqueue")
	}

	var mu sync.Mutex
	var seen []string
	w := newWorker(t, js, q, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		if b := batchHeaders(j.Header()); len(b) > 0 {
			mu.Lock()
			seen = append(seen, j.ID()+": "+strings.Join(b, ","))
			mu.Unlock()
		}
		return consumer.Permanent(errors.New("no"))
	}), consumer.Concurrency(32), consumer.GroupCommit(true))
	stop := runWorker(t, w)
	testenv.Eventually(t, 30*time.Second, "every job dead-lettered", func() bool { return w.Stats().Dead == n })
	stop()
	if len(seen) > 0 {
		t.Fatalf("handlers saw batch headers: %v", seen[:min(3, len(seen))])
	}
	dead := deadLetters(t, js, q)
	if len(dead) != n {
		t.Fatalf("%d dead letters, want %d", len(dead), n)
	}
	for _, d := range dead {
		if b := batchHeaders(d.Header); len(b) > 0 {
			t.Fatalf("dead letter #%d carries %v", d.Sequence, b)
		}
	}
	if left := pendingMessages(t, js, q); left != 0 {
		t.Fatalf("%d jobs left in the stream", left)
	}
	t.Logf("%d of %d jobs enqueued by batches; worker %+v", batched, n, w.Stats())
}
