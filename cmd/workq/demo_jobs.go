package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
)

// enqueue puts the demo's jobs on the queue, the special ones first.
func (d *demo) enqueue(ctx context.Context, js jetstream.JetStream) error {
	p, err := producer.New(ctx, js, demoQueue)
	if err != nil {
		return err
	}
	d.producer = p
	// The flaky and poison jobs come a little way in, so that the workers that are
	// about to fail take ordinary jobs first.
	var jobs []producer.Job
	for i := 1; len(jobs) < d.f.jobs; i++ {
		if len(jobs) == d.f.jobs/5 {
			jobs = append(jobs,
				producer.Job{ID: "flaky-1", Kind: "flaky", Payload: []byte(`{"fail_attempts":2}`)},
				producer.Job{ID: "poison-1", Kind: "poison", Payload: []byte(`{"fail":"always"}`)})
		}
		jobs = append(jobs, producer.Job{ID: fmt.Sprintf("job-%05d", i), Kind: "ok", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	// A job enqueued by mistake, cancelled below while it waits: it never runs.
	jobs = append(jobs, producer.Job{ID: demoCancelled, Kind: "ok", Payload: []byte(`{"oops":true}`)})
	bar := newProgress(d.a.stderr, int64(len(jobs)), "enqueue")
	const chunk = 250
	for i := 0; i < len(jobs); i += chunk {
		res, err := p.EnqueueBatch(ctx, jobs[i:min(i+chunk, len(jobs))])
		if err != nil {
			bar.clear()
			for _, r := range res {
				if r.Err != nil {
					return fmt.Errorf("enqueue %s: %v", r.ID, r.Err)
				}
			}
			return err
		}
		bar.add(len(res))
	}
	bar.finish()
	rec, err := p.Cancel(ctx, demoCancelled)
	if err != nil {
		return err
	}
	d.out.event("✗", "%s cancelled while it waited (record: %s): it never runs", demoCancelled, rec.State)
	if err := d.enqueueWorkflow(ctx, p); err != nil {
		return err
	}
	return d.enqueueTimed(ctx, p)
}

// demoCancelled is the id of the job the demo cancels.
const demoCancelled = "oops-1"

// demoUrgent is the id of the urgent job the demo enqueues behind the backlog.
const demoUrgent = "urgent-1"

// enqueueUrgent enqueues an urgent job behind the backlog once the faulty workers
// have frozen and died holding their first jobs, and the pull requests they left
// open have expired (within a third of the AckWait; see the consumer's pullTimes):
// the server could hand the job into one of those, where it would wait out an
// AckWait, whatever its priority.
func (d *demo) enqueueUrgent(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for d.stallJob.Load() == nil || d.killJob.Load() == nil {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("demo: the faulty workers did not take their first jobs within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(d.f.ackWait/3 + 100*time.Millisecond)
	d.urgentAt.Store(d.okStarts.Load()) // before the enqueue: the job may start before Enqueue returns
	if _, err := d.producer.Enqueue(ctx, []byte(`{"page":"on-call"}`), producer.ID(demoUrgent), producer.Kind("urgent"), producer.Priority(producer.PriorityUrgent)); err != nil {
		return fmt.Errorf("enqueue %s: %w", demoUrgent, err)
	}
	d.out.event("⚡", "%s enqueued with priority urgent, behind the %d-job backlog", demoUrgent, int64(d.f.jobs)-d.urgentAt.Load())
	return nil
}

// enqueueTimed enqueues a job delayed by 2 s and a schedule firing every second:
// the server keeps both and fires them itself.
func (d *demo) enqueueTimed(ctx context.Context, p *producer.Producer) error {
	info, err := p.Enqueue(ctx, []byte(`{"remind":"call Ada"}`), producer.ID("reminder-1"), producer.Kind("reminder"), producer.After(2*time.Second))
	if err != nil {
		return err
	}
	d.delayedDue = info.ScheduledAt
	if _, err := p.Schedule(ctx, "heartbeat", "@every 1s", nil, producer.Kind("tick")); err != nil {
		return err
	}
	d.out.event("⏰", "reminder-1 delayed until %s; schedule heartbeat fires every second (the server fires both)", info.ScheduledAt.Local().Format("15:04:05.000"))
	return nil
}

// demoTicks is how many firings of the heartbeat schedule the demo waits for before
// it removes the schedule.
const demoTicks = 3

// timed handles the delayed and periodic jobs.
func (d *demo) timed(ctx context.Context, j *consumer.Job, worker string) {
	switch j.Kind() {
	case "reminder":
		if d.delayedRan.CompareAndSwap(false, true) {
			d.out.event("⏰", "%s started on %s %s after its time", j.ID(), worker, time.Since(j.ScheduledAt()).Round(time.Millisecond))
		}
	case "tick":
		n := d.ticks.Add(1)
		d.out.event("⏲", "%s: firing of %s for %s, on %s", j.ID(), j.Schedule(), j.ScheduledAt().Local().Format("15:04:05"), worker)
		if n == demoTicks {
			go func() {
				if err := d.producer.RemoveSchedule(context.WithoutCancel(ctx), "heartbeat"); err != nil {
					d.out.event("⚠", "remove schedule heartbeat: %v", err)
					return
				}
				d.out.event("⏲", "schedule heartbeat removed after %d firings", demoTicks)
				close(d.scheduleDone)
			}()
		}
	}
}

// expected is how many jobs end (committed or dead) once the demo is over: the
// enqueued ones, the delayed one, the urgent one, the workflow's tasks, the
// sequences' jobs and each firing that ran.
func (d *demo) expected() int {
	return d.f.jobs + 2 + demoWorkflowTasks + demoSequenceJobs + int(d.ticks.Load())
}

// handle is every worker's job: a little work, except for the flaky and poison jobs.
func (d *demo) handle(worker string) consumer.HandlerFunc {
	return func(ctx context.Context, j *consumer.Job) error {
		if id, _ := d.stallJob.Load().(string); id == j.ID() && worker != "w-stall" {
			d.out.event("↻", "%s handed to %s (attempt %d): w-stall went silent past AckWait", j.ID(), worker, j.Attempt())
		}
		if _, ok := d.killed.Load(j.ID()); ok && j.Attempt() > 1 {
			d.redelivered.Add(1)
			d.out.event("↻", "%s redelivered to %s (attempt %d) after w-kill died holding it", j.ID(), worker, j.Attempt())
		}
		d.timed(ctx, j, worker)
		if ok, err := d.workflowTask(ctx, j, worker); ok {
			return err
		}
		if d.sequenceJob(ctx, j, worker) {
			return nil
		}
		if j.ID() == demoCancelled {
			d.cancelledRan.Store(true)
		}
		if j.Kind() == "ok" {
			d.okStarts.Add(1)
		}
		if j.ID() == demoUrgent {
			after := d.okStarts.Load() - d.urgentAt.Load()
			d.urgentAfter.Store(after)
			d.out.event("⚡", "%s started on %s ahead of the backlog (%d backlog jobs started since it was enqueued)", j.ID(), worker, after)
		}
		switch j.Kind() {
		case "flaky":
			if j.Attempt() <= 2 {
				d.out.event("⚠", "%s attempt %d failed on %s (simulated outage); it will be retried", j.ID(), j.Attempt(), worker)
				return errors.New("simulated transient failure")
			}
			d.out.event("✓", "%s succeeded on attempt %d on %s", j.ID(), j.Attempt(), worker)
		case "poison":
			d.out.event("⚠", "%s attempt %d of %d failed on %s (it always will)", j.ID(), j.Attempt(), j.MaxAttempts(), worker)
			return errors.New("poison job: cannot be processed")
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		j.SetResult([]byte(worker))
		return nil
	}
}

func (d *demo) workerOptions(name string, concurrency int, log *slog.Logger) []consumer.Option {
	return []consumer.Option{
		consumer.Name(name),
		consumer.Concurrency(concurrency),
		consumer.AckWait(d.f.ackWait),
		consumer.MaxAttempts(demoMaxAttempts),
		consumer.Backoff(consumer.Constant(150 * time.Millisecond)),
		consumer.DrainTimeout(2 * time.Second),
		consumer.Logger(log),
	}
}

func (d *demo) run(ctx context.Context, wg *sync.WaitGroup, w *consumer.Worker) {
	d.workers = append(d.workers, w)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = w.Run(ctx)
	}()
}

// startWorker starts a well-behaved worker.
func (d *demo) startWorker(ctx context.Context, wg *sync.WaitGroup, name string) error {
	js, err := d.jetstream(d.srv.URL(), "demo "+name)
	if err != nil {
		return err
	}
	w, err := consumer.New(ctx, js, demoQueue, d.handle(name), d.workerOptions(name, d.f.concurrency, d.out.logger())...)
	if err != nil {
		return err
	}
	d.run(ctx, wg, w)
	return nil
}

// stats sums the counters of the workers that did not die.
func (d *demo) stats() consumer.Stats {
	var t consumer.Stats
	for _, w := range d.workers {
		s := w.Stats()
		t.Committed += s.Committed
		t.Retried += s.Retried
		t.Dead += s.Dead
		t.Reassigned += s.Reassigned
		t.Redelivered += s.Redelivered
	}
	return t
}
