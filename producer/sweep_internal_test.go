package producer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/workflow"
	"github.com/workq/workq/testenv"
)

// A producer that dies inside an enqueue, after its records and before its
// messages, leaves jobs that no message in the queue stands for: a sequence's job
// whose batch landed, a workflow whose records are all written, and a workflow whose
// records are not. Each producer here dies there (its connection closed from within
// its enqueue), no other enqueue follows, and a worker's sweep finishes what each
// left: the sequence's job and the whole first workflow run, once each; the second
// workflow is removed, so that its id can be enqueued again, and then runs.
func TestSweepFinishesEnqueuesOfDeadProducers(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := testenv.Context(t, 60*time.Second)
	const q = "sweep"
	// dying is a producer on a connection of its own that dies at step (its n-th
	// write): the connection is closed there.
	dying := func(step string, n int) *Producer {
		t.Helper()
		nc := env.Conn(t)
		djs, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(ctx, djs, q)
		if err != nil {
			t.Fatal(err)
		}
		p.workflowStep = func(s string, i int) error {
			if s == step && i == n {
				nc.Close()
				return errors.New("the producer died here")
			}
			return nil
		}
		return p
	}
	if _, err := dying("sequence-publish", 0).Enqueue(ctx, []byte("s1"), ID("s1"), Sequence("k")); err == nil {
		t.Fatal("the sequence enqueue went through; want it to die before its publish")
	}
	whole := NewWorkflow("whole").Task("a", Job{Payload: []byte("a")}).Task("b", Job{Payload: []byte("b")}, DependsOn("a"))
	if _, err := dying("root", 0).EnqueueWorkflow(ctx, whole); err == nil {
		t.Fatal("the workflow enqueue went through; want it to die before its roots")
	}
	part := func() *Workflow {
		return NewWorkflow("part").Task("a", Job{Payload: []byte("a")}).Task("b", Job{Payload: []byte("b")}, DependsOn("a")).
			Task("c", Job{Payload: []byte("c")}, DependsOn("b"))
	}
	if _, err := dying("record", 2).EnqueueWorkflow(ctx, part()); err == nil {
		t.Fatal("the second workflow's enqueue went through; want it to die among its records")
	}

	js := env.JetStream(t)
	p, err := New(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s1", "whole.a", "whole.b"} {
		if rec, err := p.records.Get(ctx, id); err != nil || rec.State.Terminal() || rec.Attempt > 0 {
			t.Fatalf("%s before the sweep: %+v, %v; want it stored, not run", id, rec, err)
		}
	}
	if _, err := p.EnqueueWorkflow(ctx, part()); !errors.Is(err, ErrWorkflowUnderWay) {
		t.Fatalf("the second workflow again before the sweep: %v; want ErrWorkflowUnderWay (its enqueue's mark)", err)
	}

	var mu sync.Mutex
	runs := map[string]int{}
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		mu.Lock()
		runs[j.ID()]++
		mu.Unlock()
		return nil
	}), consumer.AckWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(workflow.WithGrace(ctx, 2*time.Second))
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() { stop(); <-done }()

	ended := func(ids ...string) bool {
		for _, id := range ids {
			if rec, err := p.records.Get(ctx, id); err != nil || rec.State != record.Done {
				return false
			}
		}
		return true
	}
	testenv.Eventually(t, 30*time.Second, "the dead producers' jobs done", func() bool { return ended("s1", "whole.a", "whole.b") })
	testenv.Eventually(t, 10*time.Second, "the second workflow removed, and enqueued again", func() bool {
		_, err := p.EnqueueWorkflow(ctx, part())
		return err == nil
	})
	testenv.Eventually(t, 30*time.Second, "the second workflow done", func() bool { return ended("part.a", "part.b", "part.c") })
	for _, key := range []string{workflow.EnqueueKey("whole"), workflow.EnqueueKey("part")} {
		testenv.Eventually(t, 10*time.Second, "the mark "+key+" deleted", func() bool {
			_, _, err := p.records.GetKey(ctx, key)
			return errors.Is(err, record.ErrNotFound)
		})
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"s1", "whole.a", "whole.b", "part.a", "part.b", "part.c"} {
		if runs[id] != 1 {
			t.Errorf("%s ran %d times; want once", id, runs[id])
		}
	}
}

// The sweep publishes a job's kept message only where the queue lacks it, and only
// for an enqueue older than the grace. Here first's enqueue fails before its publish,
// and second's enqueue, right after, leaves first alone as an enqueue under way: only
// the sweep publishes it, once, however often it runs; second waits for first.
func TestSweepCopiesNothing(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	p, err := New(ctx, js, "sweep-copies")
	if err != nil {
		t.Fatal(err)
	}
	p.workflowStep = func(step string, _ int) error {
		if step == "sequence-publish" {
			return errors.New("died before its publish")
		}
		return nil
	}
	if _, err := p.Enqueue(ctx, []byte("1"), ID("first"), Sequence("k")); err == nil {
		t.Fatal("first's enqueue went through; want it to fail before its publish")
	}
	p.workflowStep = nil
	if info, err := p.Enqueue(ctx, []byte("2"), ID("second"), Sequence("k")); err != nil || !info.Waiting {
		t.Fatalf("second: %+v, %v; want it waiting for first", info, err)
	}
	messages := func() uint64 {
		t.Helper()
		si, err := p.objects.Stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return si.State.Msgs
	}
	sweep := func(after, grace time.Duration, want int) {
		t.Helper()
		s, err := p.flows.Sweep(ctx, time.Now().Add(after), grace)
		if err != nil || s.Sequences != want || s.Workflows+s.Removed != 0 {
			t.Fatalf("sweep %s on, grace %s: %+v, %v; want %d sequences finished", after, grace, s, err, want)
		}
	}
	sweep(0, time.Hour, 0) // younger than the grace
	if n := messages(); n != 0 {
		t.Fatalf("%d messages in the queue after a sweep of young enqueues; want none", n)
	}
	sweep(time.Hour, time.Minute, 1)
	m, err := p.objects.Stream.GetLastMsgForSubject(ctx, p.names.JobSubject("first"))
	if err != nil || string(m.Data) != "1" {
		t.Fatalf("first's message after the sweep: %v, %v; want it published", m, err)
	}
	for range 2 {
		sweep(time.Hour, time.Minute, 0)
	}
	if n := messages(); n != 1 {
		t.Fatalf("%d messages in the queue after the sweeps; want first's alone", n)
	}
}
