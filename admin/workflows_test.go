package admin_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// An operator follows workflows through admin: one done, one failed (a task dead, its
// dependent cancelled), one running that is cancelled as a whole while another
// caller waits for it; each state as the tasks' records say, tasks parents first,
// the list newest first; unknown ids are ErrNotFound.
func TestWorkflows(t *testing.T) {
	t.Parallel()
	const q = "flows"
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 60*time.Second)
	p, err := producer.New(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	slowStarted := make(chan struct{}, 1)
	quit := make(chan struct{}) // ends the slow task when the test does
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		switch j.Task() {
		case "fail":
			return consumer.Permanent(errors.New("cannot do it"))
		case "slow":
			slowStarted <- struct{}{}
			select { // runs until cancelled
			case <-ctx.Done():
				return ctx.Err()
			case <-quit:
				return errors.New("test over")
			}
		}
		return nil
	}), consumer.Concurrency(4), consumer.AckWait(30*time.Second), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	t.Cleanup(func() { close(quit); stop(); <-ran })
	a := adm(t, js)

	// enqueue enqueues wf; with wait, it waits until every task has ended.
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
			if _, err := a.WaitJob(ctx, q, id); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Millisecond) // the next workflow is enqueued measurably later
	}
	enqueue(producer.NewWorkflow("diamond").
		Task("d", producer.Job{}, producer.DependsOn("b", "c")).
		Task("b", producer.Job{}, producer.DependsOn("a")).
		Task("c", producer.Job{}, producer.DependsOn("a")).
		Task("a", producer.Job{}), true)
	s, err := a.WaitWorkflow(ctx, q, "diamond")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range s.Tasks {
		order = append(order, r.Task)
		if r.ID != admin.TaskID("diamond", r.Task) {
			t.Errorf("task %s has the job id %s; TaskID says %s", r.Task, r.ID, admin.TaskID("diamond", r.Task))
		}
	}
	if s.State != producer.WorkflowDone || s.Counts[producer.StateDone] != 4 || len(order) != 4 || order[0] != "a" || order[3] != "d" {
		t.Errorf("WaitWorkflow(diamond) = %s, %v, tasks %v; want done, 4 done, a first and d last", s.State, s.Counts, order)
	}

	enqueue(producer.NewWorkflow("broken").
		Task("fail", producer.Job{}).
		Task("then", producer.Job{}, producer.DependsOn("fail")), true)
	s, err = a.Workflow(ctx, q, "broken")
	if err != nil {
		t.Fatal(err)
	}
	if then := s.Task("then"); s.State != producer.WorkflowFailed || s.Task("fail") == nil || s.Task("fail").State != producer.StateDead ||
		then == nil || then.State != producer.StateCancelled || !slices.Equal(then.FailedParents, []string{"fail"}) {
		t.Errorf("Workflow(broken) = %s, %v; want failed: fail dead, then cancelled for it", s.State, s.Counts)
	}

	enqueue(producer.NewWorkflow("long").
		Task("slow", producer.Job{}).
		Task("after", producer.Job{}, producer.DependsOn("slow")), false)
	select {
	case <-slowStarted:
	case <-ctx.Done():
		t.Fatal("task slow never started")
	}
	testenv.Eventually(t, 10*time.Second, "slow's record to say running", func() bool {
		r, err := a.Job(ctx, q, "long.slow")
		return err == nil && r.State == producer.StateRunning
	})
	s, err = a.Workflow(ctx, q, "long")
	if err != nil {
		t.Fatal(err)
	}
	if after := s.Task("after"); s.State != producer.WorkflowRunning || after == nil || after.State != producer.StateWaiting ||
		!slices.Equal(after.WaitingFor, []string{"slow"}) {
		t.Fatalf("Workflow(long) = %s, %v; want running, after waiting for slow", s.State, s.Counts)
	}
	list, err := a.Workflows(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range list {
		ids = append(ids, l.ID+":"+string(l.State))
	}
	if want := []string{"long:running", "broken:failed", "diamond:done"}; !slices.Equal(ids, want) {
		t.Errorf("Workflows = %v; want %v (newest first)", ids, want)
	}

	waited := make(chan *admin.WorkflowStatus, 1)
	go func() {
		s, err := a.WaitWorkflow(ctx, q, "long")
		if err != nil {
			t.Error(err)
		}
		waited <- s
	}()
	s, err = a.CancelWorkflow(ctx, q, "long")
	if err != nil {
		t.Fatal(err)
	}
	if s.State != producer.WorkflowFailed || s.Counts[producer.StateCancelled] != 2 {
		t.Errorf("CancelWorkflow(long) = %s, %v; want failed, 2 cancelled", s.State, s.Counts)
	}
	if s := <-waited; s == nil || s.State != producer.WorkflowFailed || s.Counts[producer.StateCancelled] != 2 || s.FinishedAt.IsZero() {
		t.Errorf("WaitWorkflow(long) across the cancel = %+v; want failed, 2 cancelled, finished", s)
	}
	// Cancelling an ended workflow changes nothing.
	if s, err := a.CancelWorkflow(ctx, q, "diamond"); err != nil || s.State != producer.WorkflowDone || s.Counts[producer.StateDone] != 4 {
		t.Errorf("CancelWorkflow(diamond), which ended done: %+v, %v", s, err)
	}

	for name, call := range map[string]func() error{
		"Workflow":       func() error { _, err := a.Workflow(ctx, q, "nobody"); return err },
		"WaitWorkflow":   func() error { _, err := a.WaitWorkflow(ctx, q, "nobody"); return err },
		"CancelWorkflow": func() error { _, err := a.CancelWorkflow(ctx, q, "nobody"); return err },
	} {
		if err := call(); !errors.Is(err, admin.ErrNotFound) {
			t.Errorf("%s of an unknown workflow: %v; want ErrNotFound", name, err)
		}
	}
	if _, err := a.Workflow(ctx, q, "no spaces"); !errors.Is(err, producer.ErrInvalidName) {
		t.Errorf("Workflow with an invalid id: %v; want ErrInvalidName", err)
	}
}
