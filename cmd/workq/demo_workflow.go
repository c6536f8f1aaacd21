package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
)

// The demo's workflow: render an invoice and charge the card, then send the invoice,
// which reads both results; a client waits for the send's result with Wait.

// demoWorkflow is the id of the demo's workflow.
const demoWorkflow = "invoice-7"

// demoWorkflowTasks is how many jobs the workflow adds to the demo's count.
const demoWorkflowTasks = 3

// enqueueWorkflow enqueues the demo's workflow and starts a client waiting for its
// last task's result.
func (d *demo) enqueueWorkflow(ctx context.Context, p *producer.Producer) error {
	wf := producer.NewWorkflow(demoWorkflow).
		Task("render", producer.Job{Kind: "wf-render", Payload: []byte(`{"invoice":7}`)}).
		Task("charge", producer.Job{Kind: "wf-charge", Payload: []byte(`{"amount":"42.00"}`)}).
		Task("send", producer.Job{Kind: "wf-send"}, producer.DependsOn("render", "charge"))
	if _, err := p.EnqueueWorkflow(ctx, wf); err != nil {
		return err
	}
	d.out.event("⇉", "workflow %s: render and charge, then send (it waits for both to commit)", demoWorkflow)
	go func() {
		rec, err := p.Wait(context.WithoutCancel(ctx), demoWorkflow+".send")
		if err != nil {
			d.out.event("⚠", "wait for %s.send: %v", demoWorkflow, err)
			return
		}
		d.workflowWaited.Store(time.Since(rec.FinishedAt).Nanoseconds())
		d.out.event("⇉", "Wait returned %s.send's result %q, %s after its commit", demoWorkflow, rec.Result,
			time.Since(rec.FinishedAt).Round(time.Microsecond))
	}()
	return nil
}

// workflowTask runs a task of the demo's workflow; it reports false for any other job.
func (d *demo) workflowTask(ctx context.Context, j *consumer.Job, worker string) (bool, error) {
	switch j.Kind() {
	case "wf-render":
		j.SetResult([]byte("invoice-7.pdf"))
	case "wf-charge":
		j.SetResult([]byte("ch_42"))
	case "wf-send":
		var in []string
		for _, parent := range j.Parents() {
			b, err := j.ParentResult(ctx, parent)
			if err != nil {
				return true, err
			}
			in = append(in, string(b))
		}
		d.out.event("⇉", "%s started on %s once its parents committed, with their results %s", j.ID(), worker, strings.Join(in, " and "))
		j.SetResult([]byte("sent " + strings.Join(in, " + ")))
	default:
		return false, nil
	}
	return true, nil
}

// workflowProblems checks, from the records, that the workflow completed and that its
// last task was claimed after both parents committed (record revisions are one
// sequence for the whole bucket); it returns what did not hold.
func (d *demo) workflowProblems(ctx context.Context, p *producer.Producer) []string {
	s, err := p.Workflow(ctx, demoWorkflow)
	if err != nil {
		return []string{fmt.Sprintf("workflow %s: %v", demoWorkflow, err)}
	}
	if s.State != producer.WorkflowDone {
		return []string{fmt.Sprintf("workflow %s is %s, want done", demoWorkflow, s.State)}
	}
	var problems []string
	send := s.Task("send")
	for _, parent := range []string{"render", "charge"} {
		if pr := s.Task(parent); !pr.FinishedAt.Before(send.StartedAt) {
			problems = append(problems, fmt.Sprintf("%s.send started before %s committed", demoWorkflow, parent))
		}
	}
	if d.workflowWaited.Load() < 0 {
		problems = append(problems, fmt.Sprintf("Wait did not return %s.send's result", demoWorkflow))
	}
	return problems
}
