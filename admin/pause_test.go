package admin_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// warnings counts the log records at Warn or above.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }
func (w *warnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

// A paused queue: its worker stays connected and idle without a warning, enqueues and
// a delayed job's firing land in the queue and wait, Queue says paused; the pause
// survives a server restart; resume runs every waiting job at once.
func TestPauseQueue(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	a := adm(t, js)
	ctx := testenv.Context(t, 90*time.Second)
	const q = "paused"

	if err := a.PauseQueue(ctx, q); !errors.Is(err, admin.ErrNoQueue) {
		t.Fatalf("PauseQueue of a missing queue: %v", err)
	}
	p, err := producer.New(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.PauseQueue(ctx, q); !errors.Is(err, admin.ErrNoWorkers) {
		t.Fatalf("PauseQueue before any worker: %v", err)
	}
	var ran atomic.Int32
	logs := &warnings{}
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error {
		ran.Add(1)
		return nil
	}), consumer.AckWait(3*time.Second), consumer.Logger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-done })

	if _, err := p.Enqueue(ctx, []byte("before")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the first job run", func() bool { return ran.Load() == 1 })
	if err := a.PauseQueue(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := a.PauseQueue(ctx, q); err != nil {
		t.Fatalf("pausing a paused queue: %v", err)
	}
	for range 5 {
		if _, err := p.Enqueue(ctx, []byte("during")); err != nil {
			t.Fatalf("enqueue to a paused queue: %v", err)
		}
	}
	if _, err := p.Enqueue(ctx, []byte("delayed"), producer.After(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("urgent"), producer.Priority(producer.PriorityUrgent)); err != nil {
		t.Fatal(err) // every priority level's consumer is paused
	}
	// Longer than the workers' pull requests last (they expire before AckWait) and
	// than the delayed job's time.
	time.Sleep(4 * time.Second)
	info, err := a.Queue(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Paused || info.Jobs != 7 || info.Pending != 7 || info.Scheduled != 0 || ran.Load() != 1 {
		t.Fatalf("paused queue: %+v, %d runs; want paused, 7 jobs waiting (the delayed one fired, the urgent one too), 1 run", info, ran.Load())
	}
	if msgs := logs.list(); len(msgs) > 0 {
		t.Errorf("the idle worker logged %q", msgs)
	}

	env.Restart(t)
	testenv.Eventually(t, 20*time.Second, "the queue readable after the restart", func() bool {
		info, err = a.Queue(ctx, q)
		return err == nil
	})
	time.Sleep(2 * time.Second)
	if info, err = a.Queue(ctx, q); err != nil || !info.Paused || ran.Load() != 1 {
		t.Fatalf("after a restart: %+v, %v, %d runs; want still paused, 1 run", info, err, ran.Load())
	}

	at := time.Now()
	if err := a.ResumeQueue(ctx, q); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "every waiting job run", func() bool { return ran.Load() == 8 })
	t.Logf("resume: the 7 waiting jobs ran %s after it", time.Since(at).Round(time.Millisecond))
	if time.Since(at) > 2*time.Second {
		t.Errorf("the jobs ran %s after the resume; the workers' waiting pull requests should get them at once", time.Since(at))
	}
	if info, err = a.Queue(ctx, q); err != nil || info.Paused {
		t.Fatalf("after resume: %+v, %v", info, err)
	}
	if err := a.ResumeQueue(ctx, q); err != nil {
		t.Fatalf("resuming a running queue: %v", err)
	}
}
