package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// summary prints what the workers did, checks it against the server (not only the
// workers' counters) and fails if a guarantee did not hold. procTook is the time from
// the first delivery to the last commit.
func (d *demo) summary(ctx context.Context, js jetstream.JetStream, procTook time.Duration) error {
	s := d.stats()
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	adm, err := admin.New(js)
	if err != nil {
		return err
	}
	qi, err := adm.Queue(octx, demoQueue)
	if err != nil {
		return err
	}
	p, err := producer.New(octx, js, demoQueue)
	if err != nil {
		return err
	}
	var notes []string
	if id, _ := d.stallJob.Load().(string); id != "" {
		if rec, err := p.Status(octx, id); err == nil && !rec.Worker.IsZero() {
			notes = append(notes, fmt.Sprintf("%s: frozen on w-stall, committed by %s on attempt %d", id, rec.Worker.Name, rec.Attempt))
		}
	}
	if id, _ := d.killJob.Load().(string); id != "" {
		if rec, err := p.Status(octx, id); err == nil && !rec.Worker.IsZero() {
			notes = append(notes, fmt.Sprintf("%s: lost when w-kill died, committed by %s on attempt %d", id, rec.Worker.Name, rec.Attempt))
		}
	}

	out := d.a.stdout
	wall := time.Since(d.start)
	fmt.Fprintln(out)
	t := newTable(out, "SUMMARY", "", "")
	t.row("jobs", d.f.jobs, "enqueued")
	t.row("timed", 1+d.ticks.Load(), fmt.Sprintf("fired by the server: 1 delayed job, %d firings of a schedule", d.ticks.Load()))
	t.row("committed", s.Committed, "each exactly once")
	t.row("retried", s.Retried, "failed attempts scheduled again")
	t.row("reassigned", s.Reassigned, "late commits refused")
	t.row("redelivered", s.Redelivered, "deliveries after a stall, a death or a retry")
	t.row("dead", s.Dead, fmt.Sprintf("in dead letters (%d)", qi.Dead))
	t.row("cancelled", 1, demoCancelled+", while it waited: never ran")
	t.row("workflow", demoWorkflowTasks, fmt.Sprintf("tasks of %s: send ran after render and charge committed", demoWorkflow))
	t.row("sequences", demoSequenceJobs, fmt.Sprintf("jobs of %d keys: each key one at a time, in enqueue order", len(demoSequenceKeys)))
	t.row("urgent", d.urgentAfter.Load(), fmt.Sprintf("backlog jobs started between %s's enqueue and its start", demoUrgent))
	t.row("throughput", fmt.Sprintf("%.0f jobs/s", float64(d.f.jobs)/procTook.Seconds()), "first delivery to last commit, waits for AckWait included")
	t.row("wall time", wall.Round(10*time.Millisecond), "server start to summary")
	_ = t.flush()
	for _, n := range notes {
		fmt.Fprintln(out, "  "+n)
	}

	var problems []string
	if int(s.Committed+s.Dead) != d.expected() {
		problems = append(problems, fmt.Sprintf("%d committed + %d dead ≠ %d jobs", s.Committed, s.Dead, d.expected()))
	}
	if s.Reassigned < 1 {
		problems = append(problems, "the stalled worker's commit was not refused")
	}
	if s.Dead != 1 || qi.Dead != 1 {
		problems = append(problems, fmt.Sprintf("%d dead (%d dead letters), want 1", s.Dead, qi.Dead))
	}
	if waiting := int64(d.f.jobs) - d.urgentAt.Load(); d.urgentAfter.Load() > waiting/2 {
		problems = append(problems, fmt.Sprintf("%s started after %d of the %d jobs waiting before it", demoUrgent, d.urgentAfter.Load(), waiting))
	}
	if d.cancelledRan.Load() {
		problems = append(problems, demoCancelled+" ran although it was cancelled")
	}
	if rec, err := p.Status(octx, demoCancelled); err != nil || rec.State != producer.StateCancelled {
		problems = append(problems, fmt.Sprintf("%s: record %v, %v; want cancelled", demoCancelled, rec, err))
	}
	problems = append(problems, d.workflowProblems(octx, p)...)
	problems = append(problems, d.sequenceProblems(octx, p)...)
	if qi.Jobs != 0 {
		problems = append(problems, fmt.Sprintf("%d jobs left in the queue", qi.Jobs))
	}
	if len(problems) > 0 {
		return fmt.Errorf("demo: guarantees not met: %s", strings.Join(problems, "; "))
	}
	fmt.Fprintf(out, "\nEvery job ran to one committed result or a dead letter. Next: 'workq server', then 'workq enqueue', 'workq work' and 'workq ui'.\n")
	return nil
}
