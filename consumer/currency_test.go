package consumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A worker cut off past AckWait with a job still in its pull buffer must not run that
// job when it comes back: the job was redelivered and committed elsewhere meanwhile.
// A first delivery runs without reading the job record only while the worker can
// prove the delivery is still its own; this one it cannot, so it reads the record,
// finds the job done and leaves it.
func TestCutOffWorkerDoesNotRunItsBufferedJobs(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	jsA, px := proxiedJS(t, env)
	const q = "currency"
	p := newProducer(t, js, q)
	opts := []consumer.Option{consumer.AckWait(time.Second), consumer.Concurrency(1)}

	runsA := &runLog{}
	startedA, releaseA := make(chan struct{}, 1), make(chan struct{})
	wA := newWorker(t, jsA, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		runsA.add(j.ID(), j.Attempt())
		if j.ID() == "job-1" {
			startedA <- struct{}{}
			<-releaseA
		}
		return nil
	}), append(opts, consumer.Prefetch(2), consumer.Name("A"))...)
	runWorker(t, wA)
	for _, id := range []string{"job-1", "job-2"} {
		if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte(id), producer.ID(id)); err != nil {
			t.Fatal(err)
		}
	}
	<-startedA
	ctx := testenv.Context(t, 10*time.Second)
	c, err := js.Consumer(ctx, "WORKQ_"+q, "workers")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "A to hold job-2 in its buffer", func() bool {
		info, err := c.Info(ctx)
		return err == nil && info.NumAckPending == 2
	})
	px.Pause()

	runsB := &runLog{}
	wB := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		runsB.add(j.ID(), j.Attempt())
		return nil
	}), append(opts, consumer.Name("B"))...)
	runWorker(t, wB)
	for _, id := range []string{"job-1", "job-2"} {
		testenv.Eventually(t, 15*time.Second, id+" committed by B", func() bool { return status(t, p, id).State == producer.StateDone })
	}

	px.Resume()
	close(releaseA)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s := wA.Stats()
		if s.Reassigned == 1 && s.AlreadyDone+s.Watched >= 1 {
			break
		}
		if time.Now().After(deadline) {
			// Say where A stands: this wait failed twice in about 50 runs (not explained yet).
			t.Fatalf("timed out after 10s waiting for A to come to job-2 and leave it: A %+v, health %v, runs %v",
				s, wA.Health(), runsA.runs("job-2"))
		}
	}
	if got := runsA.runs("job-2"); len(got) != 0 {
		t.Fatalf("A ran job-2 (attempts %v) after it was committed by B", got)
	}
	if got := runsB.runs("job-2"); len(got) != 1 {
		t.Fatalf("B ran job-2 %d times, want 1", len(got))
	}
}
