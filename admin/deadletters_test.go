package admin_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A dead letter that kept only part of its payload (it was shrunk to fit the server's
// max payload) is not requeued: its job would run on the part that fitted.
func TestRequeueRefusesTruncatedDeadLetter(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := producer.New(ctx, js, "cut"); err != nil {
		t.Fatal(err)
	}
	for id, truncated := range map[string]bool{"whole": false, "partial": true} {
		m := &nats.Msg{Subject: "workq.cut.dead", Data: []byte("p"), Header: nats.Header{}}
		m.Header.Set("Workq-Job-Id", id)
		m.Header.Set("Nats-Msg-Id", "dead:"+id)
		if truncated {
			m.Header.Set("Workq-Payload-Truncated", "1048576")
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	done, err := adm(t, js).RequeueDead(ctx, "cut", admin.Selection{IDs: []string{"partial"}}, nil)
	if err == nil || len(done) != 0 || !strings.Contains(err.Error(), "part of its payload") {
		t.Fatalf("Requeue of a truncated dead letter: %v, %v; want refused", done, err)
	}
	done, err = adm(t, js).RequeueDead(ctx, "cut", admin.Selection{IDs: []string{"whole"}}, nil)
	if err != nil || len(done) != 1 {
		t.Fatalf("Requeue of a whole dead letter: %v, %v", done, err)
	}
}

// A delayed job that died is requeued as a new run: it runs again, though its
// record (dead) carries the same due time as its first firing did, and at its
// priority level.
func TestRequeueRunsDeadDelayedJob(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	p, err := producer.New(ctx, js, "later")
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	var levels sync.Map
	w, err := consumer.New(ctx, js, "later", consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		levels.Store(runs.Load()+1, j.Priority())
		if runs.Add(1) == 1 {
			return consumer.Permanent(errors.New("first run fails for good"))
		}
		return nil
	}), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(t, w)
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("remind"), producer.After(200*time.Millisecond), producer.Priority(producer.PriorityHigh)); err != nil {
		t.Fatal(err)
	}
	state := func() producer.State { return jobState(t, p, "remind") }
	testenv.Eventually(t, 10*time.Second, "the delayed job dead", func() bool { return state() == producer.StateDead })
	// The record says dead before the dead letter is published: requeue once it is.
	testenv.Eventually(t, 10*time.Second, "the dead letter requeued", func() bool {
		got, err := adm(t, js).RequeueDead(ctx, "later", admin.Selection{IDs: []string{"remind"}}, nil)
		return err == nil && len(got) == 1
	})
	testenv.Eventually(t, 10*time.Second, "the requeued job done", func() bool { return state() == producer.StateDone })
	if n := runs.Load(); n != 2 {
		t.Fatalf("ran %d times, want 2", n)
	}
	for run := int32(1); run <= 2; run++ {
		if l, _ := levels.Load(run); l != producer.PriorityHigh {
			t.Errorf("run %d at priority %v, want %d", run, l, producer.PriorityHigh)
		}
	}
}

// A job enqueued without a kind to a worker with a Mux dies with ErrUnknownKind; a
// requeue with RequeueKind gives it the kind a handler takes, and it runs (issue 25:
// a requeue could not fix its kind).
func TestRequeueWithKind(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	p, err := producer.New(ctx, js, "kinds")
	if err != nil {
		t.Fatal(err)
	}
	mux := consumer.NewMux()
	var ran atomic.Int32
	mux.RouteFunc("email", func(context.Context, *consumer.Job) error { ran.Add(1); return nil })
	w, err := consumer.New(ctx, js, "kinds", mux, consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(t, w)
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("kindless")); err != nil {
		t.Fatal(err)
	}
	state := func() producer.State { return jobState(t, p, "kindless") }
	testenv.Eventually(t, 10*time.Second, "the kindless job dead", func() bool { return state() == producer.StateDead })
	if _, err := adm(t, js).RequeueDead(ctx, "kinds", admin.Selection{All: true}, nil, admin.RequeueKind(strings.Repeat("k", 2000))); !errors.Is(err, producer.ErrInvalidOption) {
		t.Fatalf("RequeueKind of 2000 bytes: %v, want ErrInvalidOption", err)
	}
	testenv.Eventually(t, 10*time.Second, "the dead letter requeued", func() bool {
		got, err := adm(t, js).RequeueDead(ctx, "kinds", admin.Selection{IDs: []string{"kindless"}}, nil, admin.RequeueKind("email"))
		return err == nil && len(got) == 1
	})
	testenv.Eventually(t, 10*time.Second, "the requeued job done", func() bool { return state() == producer.StateDone })
	if r, _ := p.Status(ctx, "kindless"); r.Kind != "email" || ran.Load() != 1 {
		t.Fatalf("record %+v after %d runs: want kind email, one run", r, ran.Load())
	}
}

// runUntilEnd runs w until the test ends.
func runUntilEnd(t *testing.T, w *consumer.Worker) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
}

// jobState is job id's state as p reports it, failing the test on error.
func jobState(t *testing.T, p *producer.Producer, id string) producer.State {
	t.Helper()
	r, err := p.Status(testenv.Context(t, 5*time.Second), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}
