package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A fired job, delayed or periodic, that fails for good reaches the dead letters:
// the server's schedule headers it came with would make the server refuse its dead
// letter, so neither the handler nor the dead letter sees them. Its handler sees
// the job's own headers, kind and attempt limit.
func TestFiredJobsDeadLetter(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "fired-dead")
	var mu sync.Mutex
	var seen []string
	w := newWorker(t, js, "fired-dead", consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		mu.Lock()
		defer mu.Unlock()
		for k := range j.Header() {
			if strings.HasPrefix(k, "Nats-Schedule") || strings.HasPrefix(k, "Nats-Expected") {
				seen = append(seen, j.ID()+": "+k)
			}
		}
		if j.Header().Get("Team") != "ops" || j.Kind() != "k" || j.MaxAttempts() != 1 {
			seen = append(seen, fmt.Sprintf("%s: header %v kind %q max attempts %d", j.ID(), j.Header(), j.Kind(), j.MaxAttempts()))
		}
		return errors.New("fails")
	}))
	runWorker(t, w)
	ctx := testenv.Context(t, 30*time.Second)
	opts := []producer.EnqueueOption{producer.Kind("k"), producer.Header("Team", "ops"), producer.MaxAttempts(1)}
	if _, err := p.Enqueue(ctx, []byte("x"), append(opts, producer.ID("later"), producer.After(300*time.Millisecond))...); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Schedule(ctx, "tick", "@every 1s", []byte("t"), opts...); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the delayed job and a firing dead", func() bool { return w.Stats().Dead >= 2 })
	if err := p.RemoveSchedule(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	if r := status(t, p, "later"); r.State != producer.StateDead {
		t.Fatalf("later: %+v", r)
	}
	dead, err := js.Stream(ctx, "WORKQ_fired-dead_DEAD")
	if err != nil {
		t.Fatal(err)
	}
	info, err := dead.Info(ctx)
	if err != nil || info.State.Msgs < 2 {
		t.Fatalf("dead letters: %+v, %v", info, err)
	}
	var ids []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := dead.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.Header.Get("Workq-Job-Id"))
	}
	if !slices.Contains(ids, "later") || !strings.Contains(strings.Join(ids, ","), "tick/") {
		t.Errorf("dead letters of %v; want later and a tick firing", ids)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > 0 {
		t.Errorf("handlers saw: %v", seen)
	}
}

// Cancels racing the server's firing: each job either ran and committed (its cancel
// said it had finished) or is cancelled (its cancel succeeded: before it fired, as it
// fired, or as it ran) and was never committed, and no job ran twice.
func TestCancelRacingTheFiring(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	p := newProducer(t, js, "cancel-race")
	st := newStarted()
	w := newWorker(t, js, "cancel-race", st.handler(), consumer.Concurrency(16))
	runWorker(t, w)
	ctx := testenv.Context(t, 60*time.Second)
	const n = 200
	due := time.Now().Add(time.Second)
	for i := range n {
		if _, err := p.Enqueue(ctx, []byte("x"), producer.ID(fmt.Sprint("j", i)), producer.At(due)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Until(due) - 20*time.Millisecond)
	cancelled := map[string]bool{}
	for i := range n {
		id := fmt.Sprint("j", i)
		_, err := p.Cancel(ctx, id)
		switch {
		case err == nil:
			cancelled[id] = true
		case errors.Is(err, producer.ErrFinished):
		default:
			t.Fatalf("Cancel(%s): %v", id, err)
		}
	}
	testenv.Eventually(t, 20*time.Second, "the stream empty", func() bool { return qaStreamMsgs(t, js, "WORKQ_cancel-race") == 0 })
	ran := st.ids()
	for i := range n {
		id := fmt.Sprint("j", i)
		if !cancelled[id] && ran[id] != 1 || ran[id] > 1 {
			t.Errorf("%s (cancelled %t) ran %d times", id, cancelled[id], ran[id])
		}
		want := producer.StateDone
		if cancelled[id] {
			want = producer.StateCancelled
		}
		if r := status(t, p, id); r.State != want {
			t.Errorf("%s (cancelled %t): record %s, want %s", id, cancelled[id], r.State, want)
		}
	}
	t.Logf("%d cancelled, %d ran, %d dropped or stopped by workers as cancelled", len(cancelled), len(ran), w.Stats().Cancelled)
}
