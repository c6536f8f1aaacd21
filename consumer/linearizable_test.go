package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// On a replicated queue the reads that decide — a claim, Job.Fence — and Status go to
// the records stream's leader, never through direct gets, which any replica may
// answer (one that lags after a restart serves old records). producer.ReplicaReads
// lets Status use direct gets.
func TestReplicatedRecordsAreReadFromTheLeader(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, 3)
	const q = "linear"
	url := cl.URLs()[0] // every connection on one node, so the spy sees every request at once
	conn := func() jetstream.JetStream {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	spy := conn().Conn()
	var direct, leader atomic.Int64
	for subj, n := range map[string]*atomic.Int64{
		"$JS.API.DIRECT.GET.KV_WORKQ_" + q + "_JOBS":     &direct,
		"$JS.API.DIRECT.GET.KV_WORKQ_" + q + "_JOBS.>":   &direct,
		"$JS.API.STREAM.MSG.GET.KV_WORKQ_" + q + "_JOBS": &leader,
	} {
		if _, err := spy.Subscribe(subj, func(*nats.Msg) { n.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	js := conn()
	p := newProducer(t, js, q, producer.Replicas(3))
	w := newWorker(t, conn(), q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		return j.Fence(ctx)
	}))
	runWorker(t, w)
	enqueueN(t, p, 3, "j")
	for _, id := range []string{"j-0", "j-1", "j-2"} {
		testenv.Eventually(t, 20*time.Second, id+" done", func() bool { return status(t, p, id).State == producer.StateDone })
	}
	if d, l := direct.Load(), leader.Load(); d != 0 || l == 0 {
		t.Fatalf("%d direct gets and %d leader gets of job records; want none and some", d, l)
	}

	replica := newProducer(t, js, q, producer.ReplicaReads())
	if r := status(t, replica, "j-0"); r.State != producer.StateDone {
		t.Fatalf("ReplicaReads Status: %s", r.State)
	}
	testenv.Eventually(t, 5*time.Second, "ReplicaReads to use a direct get", func() bool { return direct.Load() > 0 })
}

// A fenced run's fencing token is its claim's revision, written before the handler
// starts: FencingToken needs no server (here it is out of reach), is never 0, and the
// job's later records are past it.
func TestFencingTokenIsTheClaim(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	jsW, px := proxiedJS(t, env)
	const q = "token"
	p := newProducer(t, js, q)
	type result struct {
		token uint64
		err   error
	}
	got := make(chan result, 1)
	w := newWorker(t, jsW, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		px.Pause()
		tctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		token, err := j.FencingToken(tctx)
		cancel()
		px.Resume()
		got <- result{token, err}
		return err
	}))
	runWorker(t, w)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("x"), producer.ID("t1")); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
		if r.err != nil || r.token == 0 {
			t.Fatalf("FencingToken with the server out of reach = %d, %v; want the claim's revision", r.token, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler never ran")
	}
	testenv.Eventually(t, 20*time.Second, "the job to commit", func() bool { return status(t, p, "t1").State == producer.StateDone })
	if rec := status(t, p, "t1"); rec.Revision <= r.token {
		t.Fatalf("done record at revision %d, not past the token %d", rec.Revision, r.token)
	}
}
