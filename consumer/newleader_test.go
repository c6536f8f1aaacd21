package consumer_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/kvlock"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// newLeaderRounds is how many fresh queues TestFirstWritesOnANewReplicatedQueue
// creates: each round meets the window in which the new streams elect their
// leaders.
const newLeaderRounds = 6

// A user deploys, creates an R3 queue and uses it at once: every first write —
// a single, a batched, a unique and a delayed enqueue, a worker's claims and
// commits, a lock on a new bucket — goes through, once, while the new streams,
// buckets and consumers are still electing their leaders. Fails without the wait
// for the leaders (the unique reservation got "no response from stream").
func TestFirstWritesOnANewReplicatedQueue(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, 3)
	js := cl.JetStream(t)
	for round := range newLeaderRounds {
		q := fmt.Sprintf("nl%d", round)
		p := newProducer(t, js, q, producer.Replicas(3))
		useAtOnce(t, js, p, q, fmt.Sprintf("nl%d", round))
	}
}

// The same right after the leaders of the queue's streams and of the lock bucket
// step down: writes wait for the new leaders and go through once.
func TestWritesAfterLeaderStepdown(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, 3)
	js := cl.JetStream(t)
	p := newProducer(t, js, "sd", producer.Replicas(3))
	useAtOnce(t, js, p, "sd", "sd0")
	for round := 1; round <= 3; round++ {
		for _, stream := range []string{"WORKQ_sd", "KV_WORKQ_sd_JOBS", "KV_WORKQ_sd_UNIQUE", "KV_sd0"} {
			stepDown(t, js, stream)
		}
		useAtOnce(t, js, p, "sd", fmt.Sprintf("sd%d", round))
	}
}

// Writes made while the queue's streams have no leader wait for one and go
// through, once: the client is connected to node 0, every stream of the queue and
// the lock bucket is led by another node, and nodes 1 and 2 are stopped for two
// seconds, so that node 0 has no leader to send to (it answers no responders) and
// cannot elect one. A single, a batched, a unique and a delayed enqueue, a cancel
// and a lock are made during the outage; once the nodes are back each returns
// without error, and a worker runs each stored job once. Fails without the waits
// for a leader: the unique reservation, the cancel and the lock fail with "no
// response from stream" within half a second (nats.go's own two retries).
func TestWritesWaitForALeader(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, 3)
	nc, err := nats.Connect(cl.Server(0).URL(), append(cl.ClientOptions(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 60*time.Second)
	p := newProducer(t, js, "lw", producer.Replicas(3))
	// The objects the writes below touch exist: the unique bucket, a job to cancel,
	// the lock bucket.
	if _, err := p.Enqueue(ctx, nil, producer.Unique("warm")); err != nil {
		t.Fatal(err)
	}
	victim, err := p.Enqueue(ctx, []byte("cancel me"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := kvlock.New(ctx, js, kvlock.Bucket("lwlocks"), kvlock.Replicas(3))
	if err != nil {
		t.Fatal(err)
	}
	streams := []string{"WORKQ_lw", "KV_WORKQ_lw_JOBS", "KV_WORKQ_lw_UNIQUE", "KV_lwlocks"}
	for _, stream := range streams {
		for cl.StreamLeader(stream) <= 0 {
			stepDown(t, js, stream)
			testenv.Eventually(t, 10*time.Second, stream+" led", func() bool { return cl.StreamLeader(stream) >= 0 })
		}
	}
	cl.Stop(1)
	cl.Stop(2)

	type result struct {
		what string
		id   string
		err  error
	}
	results := make(chan result, 6)
	go func() {
		info, err := p.Enqueue(ctx, []byte("single"))
		results <- result{"Enqueue", info.ID, err}
	}()
	go func() {
		res, err := p.EnqueueBatch(ctx, []producer.Job{{Payload: []byte("batched")}})
		results <- result{"EnqueueBatch", res[0].ID, err}
	}()
	go func() {
		info, err := p.Enqueue(ctx, []byte("unique"), producer.Unique("k"))
		if err == nil && info.Duplicate {
			err = fmt.Errorf("a duplicate of %s", info.ID)
		}
		results <- result{"unique Enqueue", info.ID, err}
	}()
	go func() {
		info, err := p.Enqueue(ctx, []byte("delayed"), producer.After(time.Second))
		results <- result{"delayed Enqueue", info.ID, err}
	}()
	go func() {
		_, err := p.Cancel(ctx, victim.ID)
		results <- result{"Cancel", "", err}
	}()
	go func() {
		lk, err := l.Acquire(ctx, "lock", kvlock.TTL(5*time.Second))
		if err == nil {
			err = lk.Release(ctx)
		}
		results <- result{"Acquire", "", err}
	}()
	time.Sleep(2 * time.Second)
	cl.Restart(t, 1)
	cl.Restart(t, 2)

	var ids []string
	for range cap(results) {
		r := <-results
		if r.err != nil {
			t.Errorf("%s while the streams had no leader: %v", r.what, r.err)
		} else if r.id != "" {
			ids = append(ids, r.id)
		}
	}
	if t.Failed() {
		return
	}
	if r, err := p.Status(ctx, victim.ID); err != nil || r.State != producer.StateCancelled {
		t.Fatalf("cancelled job %s: %+v, %v; want cancelled", victim.ID, r, err)
	}
	runEachOnce(t, js, p, "lw", ids)
}

// runEachOnce runs a replicated worker on queue q until the jobs ids are done, and
// checks that each ran once.
func runEachOnce(t *testing.T, js jetstream.JetStream, p *producer.Producer, q string, ids []string) {
	t.Helper()
	runs := make(map[string]*atomic.Int64, len(ids))
	for _, id := range ids {
		runs[id] = new(atomic.Int64)
	}
	stop := runWorker(t, newWorker(t, js, q, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		if n, ok := runs[j.ID()]; ok {
			n.Add(1)
		}
		return nil
	}), consumer.Replicas(3)))
	for _, id := range ids {
		testenv.Eventually(t, 30*time.Second, "job "+id+" done", func() bool {
			r, err := p.Status(testenv.Context(t, 5*time.Second), id)
			return err == nil && r.State == producer.StateDone
		})
	}
	stop()
	for id, n := range runs {
		if got := n.Load(); got != 1 {
			t.Errorf("queue %s: job %s ran %d times, want once", q, id, got)
		}
	}
}

// useAtOnce enqueues a single, a batched, a unique and a delayed job on queue q,
// runs a replicated worker until all four are done, each exactly once, and takes
// a lock on bucket (created replicated if missing).
func useAtOnce(t *testing.T, js jetstream.JetStream, p *producer.Producer, q, bucket string) {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	var ids []string
	info, err := p.Enqueue(ctx, []byte("single"))
	if err != nil {
		t.Fatalf("queue %s: Enqueue: %v", q, err)
	}
	ids = append(ids, info.ID)
	res, err := p.EnqueueBatch(ctx, []producer.Job{{Payload: []byte("batched")}})
	if err != nil {
		t.Fatalf("queue %s: EnqueueBatch: %v", q, err)
	}
	ids = append(ids, res[0].ID)
	info, err = p.Enqueue(ctx, []byte("unique"), producer.Unique("k-"+bucket))
	if err != nil || info.Duplicate {
		t.Fatalf("queue %s: unique Enqueue = %+v, %v; want stored", q, info, err)
	}
	ids = append(ids, info.ID)
	info, err = p.Enqueue(ctx, []byte("delayed"), producer.After(300*time.Millisecond))
	if err != nil {
		t.Fatalf("queue %s: delayed Enqueue: %v", q, err)
	}
	ids = append(ids, info.ID)
	runEachOnce(t, js, p, q, ids)

	l, err := kvlock.New(ctx, js, kvlock.Bucket(bucket), kvlock.Replicas(3))
	if err != nil {
		t.Fatalf("kvlock.New %s: %v", bucket, err)
	}
	lk, err := l.Acquire(ctx, "lock", kvlock.TTL(5*time.Second))
	if err != nil {
		t.Fatalf("bucket %s: Acquire: %v", bucket, err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("bucket %s: Release: %v", bucket, err)
	}
}

// stepDown asks stream's leader to step down and returns at once, while the
// replicas elect another.
func stepDown(t *testing.T, js jetstream.JetStream, stream string) {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil); err != nil {
		t.Fatalf("step down %s: %v", stream, err)
	}
}
