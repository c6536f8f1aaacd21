package ui_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// fillWorkflows enqueues workflows on queue "orders" of js and runs its worker until
// the test ends, leaving:
//
//	order-1: a → b, c → d, all done.
//	order-2: charge dead (with the hostile error) → ship cancelled for it; notify,
//	         which runs if a parent failed, done. The workflow failed.
//	order-3: slow running (until cancelled or the test ends) → after, waiting.
//	plain-1: a job outside any workflow, done.
func fillWorkflows(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	const q = "orders"
	ctx := testenv.Context(t, 60*time.Second)
	p, err := producer.New(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	running := make(chan struct{}, 1)
	quit := make(chan struct{}) // ends the slow task when the test does
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		switch j.Task() {
		case "charge":
			return consumer.Permanent(errors.New(hostileError))
		case "slow":
			running <- struct{}{}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-quit:
				return errors.New("test over")
			}
		}
		j.SetResult([]byte(`{"ok":true}`))
		return nil
	}), consumer.Concurrency(4), consumer.AckWait(30*time.Second), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { close(quit); stop(); <-done })

	adm, err := admin.New(js)
	if err != nil {
		t.Fatal(err)
	}
	// enqueue enqueues wf; with wait, it waits until every task has ended (each
	// task's record: a workflow's state read while its records are written can miss
	// one of them, see admin's TestWorkflows).
	enqueue := func(wf *producer.Workflow, wait bool) {
		t.Helper()
		info, err := p.EnqueueWorkflow(ctx, wf)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range info.Tasks {
			if !wait {
				break
			}
			if _, err := adm.WaitJob(ctx, q, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueue(producer.NewWorkflow("order-1").
		Task("a", producer.Job{}).
		Task("b", producer.Job{}, producer.DependsOn("a")).
		Task("c", producer.Job{}, producer.DependsOn("a")).
		Task("d", producer.Job{}, producer.DependsOn("b", "c")), true)
	if s, err := adm.Workflow(ctx, q, "order-1"); err != nil || s.State != producer.WorkflowDone || s.Counts[producer.StateDone] != 4 {
		t.Fatalf("order-1: %+v, %v; want done", s, err)
	}
	time.Sleep(10 * time.Millisecond) // each workflow is enqueued measurably after the last
	enqueue(producer.NewWorkflow("order-2").
		Task("charge", producer.Job{}).
		Task("ship", producer.Job{}, producer.DependsOn("charge")).
		Task("notify", producer.Job{}, producer.DependsOn("charge"), producer.RunIfParentFailed()), true)
	if s, err := adm.Workflow(ctx, q, "order-2"); err != nil || s.State != producer.WorkflowFailed || s.Counts[producer.StateDone] != 1 {
		t.Fatalf("order-2: %+v, %v; want failed, notify done", s, err)
	}
	time.Sleep(10 * time.Millisecond)
	enqueue(producer.NewWorkflow("order-3").
		Task("slow", producer.Job{}).
		Task("after", producer.Job{}, producer.DependsOn("slow")), false)
	select {
	case <-running:
	case <-ctx.Done():
		t.Fatal("order-3's task slow never started")
	}
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("plain-1")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "order-3.slow running, plain-1 done", func() bool {
		s, err := adm.Job(ctx, q, "order-3.slow")
		r, perr := adm.Job(ctx, q, "plain-1")
		return err == nil && perr == nil && s.State == producer.StateRunning && r.State == producer.StateDone
	})
}
