package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A handler that reports progress in a tight loop writes its record once for the
// loop (the first report), and its last report with the commit; a Wait that follows
// the job sees the written report before the end.
func TestProgressIsCoalesced(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "progress"
	p := newProducer(t, js, q)
	looped, release := make(chan uint64, 1), make(chan struct{})
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		for _, bad := range []float64{-0.1, 1.5, math.NaN()} {
			if err := j.Progress(ctx, bad, ""); !errors.Is(err, consumer.ErrInvalidProgress) {
				return fmt.Errorf("Progress(%v) = %v, want ErrInvalidProgress", bad, err)
			}
		}
		tok, err := j.FencingToken(ctx)
		if err != nil {
			return err
		}
		for i := 1; i <= 1000; i++ {
			if err := j.Progress(ctx, float64(i)/1000, fmt.Sprintf("step %d", i)); err != nil {
				return err
			}
		}
		looped <- tok
		<-release
		return nil
	})
	runWorker(t, newWorker(t, js, q, h))
	ctx := testenv.Context(t, 60*time.Second)
	if _, err := p.Enqueue(ctx, nil, producer.ID("long")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []*producer.Record
	waited := make(chan *producer.Record, 1)
	go func() {
		r, err := p.Wait(ctx, "long", producer.Following(func(r *producer.Record) {
			mu.Lock()
			seen = append(seen, r)
			mu.Unlock()
		}))
		if err != nil {
			t.Error(err)
		}
		waited <- r
	}()
	claim := <-looped
	r := status(t, p, "long")
	if r.Revision != claim+1 || r.Progress != 0.001 || r.ProgressNote != "step 1" || r.ProgressAt.IsZero() {
		t.Fatalf("after 1000 reports: revision %d (claim %d), progress %v %q; want one write, of the first report",
			r.Revision, claim, r.Progress, r.ProgressNote)
	}
	close(release)
	final := <-waited
	if final == nil || final.State != producer.StateDone || final.Progress != 1 || final.ProgressNote != "step 1000" {
		t.Fatalf("final record %+v, want done with the last report", final)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, r := range seen {
		found = found || r.Progress == 0.001 && r.State == producer.StateRunning
	}
	if !found {
		t.Errorf("Following saw %d records, none with the first report", len(seen))
	}
}

// An unfenced worker has no record to report progress in.
func TestProgressUnfenced(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "progress-unfenced"
	p := newProducer(t, js, q)
	got := make(chan error, 1)
	runWorker(t, newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		got <- j.Progress(ctx, 0.5, "")
		return nil
	}), consumer.Unfenced()))
	if _, err := p.Enqueue(testenv.Context(t, 30*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, consumer.ErrUnfenced) {
		t.Fatalf("Progress on an unfenced worker: %v, want ErrUnfenced", err)
	}
}
