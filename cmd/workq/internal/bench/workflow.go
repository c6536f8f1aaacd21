package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/producer"
)

// The workflow scenario: what a task's dependencies cost. Both comparisons are
// workq against workq, since raw JetStream has no dependencies to compare with: a
// fan-out/fan-in workflow against the same jobs without dependencies, and the
// release of a dependent (its parent's commit → its start) against a lone job's
// enqueue → start.

// FanOut is the fan-out/fan-in comparison: Workq is the workflow's tasks per second,
// Raw the same number of plain jobs' per second, both from the enqueue's start to
// the last commit.
type FanOut struct {
	Pair
	// WorkflowEnqueue and PlainEnqueue are how long EnqueueWorkflow and EnqueueBatch
	// took.
	WorkflowEnqueue, PlainEnqueue time.Duration
	// Independent is the tasks per second of a workflow of as many tasks with no
	// dependencies, timed the same way: what a task costs beyond a plain job (its
	// record, written at the enqueue and read by its claim) before any release.
	Independent float64
	// Phases are when the workflow's tasks got where, from the enqueue's start, as
	// their records say.
	Phases FanOutPhases
}

// FanOutPhases are the times, from the enqueue's start, at which a fan-out/fan-in
// workflow's tasks started and committed, from their records (StartedAt,
// FinishedAt).
type FanOutPhases struct {
	RootStarted, RootDone time.Duration
	// MiddleStarted and MiddleDone are when the last of the middle tasks started and
	// when the last committed.
	MiddleStarted, MiddleDone time.Duration
	LastStarted, LastDone     time.Duration
}

func (ph FanOutPhases) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("root started %s, committed %s; middle tasks all started %s, all committed %s; last task started %s, committed %s (from the enqueue's start)",
		r(ph.RootStarted), r(ph.RootDone), r(ph.MiddleStarted), r(ph.MiddleDone), r(ph.LastStarted), r(ph.LastDone))
}

// The fan-out/fan-in workflow's task names: the middle tasks are named by their
// number.
const (
	fanRoot = "root"
	fanLast = "last"
)

// WorkflowFanOut times a workflow of n tasks (at least 3) — a root, n-2 tasks that
// depend on it, one last task that depends on all of those — from the start of its
// EnqueueWorkflow until its last task has committed, against n jobs without
// dependencies enqueued with EnqueueBatch until the last of them has committed, and
// against a workflow of n tasks with no dependencies (FanOut.Independent). Each
// side has a queue of its own and a worker with every scenario's settings at the
// given concurrency and an empty handler, running (and warmed by one job) before the
// enqueue starts. The end is the worker's own count of commits reaching the jobs
// enqueued, looked at every millisecond.
//
// It then reads the workflow's records and fails if a task did not wait for its
// parents: a middle task that started before the root committed, the last task
// before every middle task committed, a task that did not end done or ran twice.
func WorkflowFanOut(ctx context.Context, env Env, n, concurrency int) (FanOut, error) {
	res := FanOut{Pair: Pair{Scenario: fmt.Sprintf("workflow fan-out/fan-in of %d vs plain jobs (workq, c=%d)", n, concurrency), N: n}}
	if n < 3 {
		return res, fmt.Errorf("a fan-out/fan-in workflow needs at least 3 tasks, not %d", n)
	}
	opts := env.workerOpts(consumer.Concurrency(concurrency), consumer.Logger(quiet()))

	t, err := timePlain(ctx, env, "bench-wfp", n, opts)
	if err != nil {
		return res, fmt.Errorf("plain jobs: %w", err)
	}
	res.Raw, res.PlainEnqueue = rate(n, t.took), t.enqueue

	alone, err := newCommitTimer(ctx, env, "bench-wfi", opts)
	if err != nil {
		return res, fmt.Errorf("independent tasks: %w", err)
	}
	defer alone.close()
	t, err = alone.time(ctx, n, func(ctx context.Context, p *producer.Producer) error {
		wf := producer.NewWorkflow("alone")
		for i := range n {
			wf.Task(strconv.Itoa(i), producer.Job{Payload: payload})
		}
		_, err := p.EnqueueWorkflow(ctx, wf)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("independent tasks: %w", err)
	}
	res.Independent = rate(n, t.took)
	if err := alone.close(); err != nil {
		return res, fmt.Errorf("independent tasks: %w", err)
	}

	flow, err := newCommitTimer(ctx, env, "bench-wf", opts)
	if err != nil {
		return res, fmt.Errorf("workflow: %w", err)
	}
	defer flow.close()
	var info *producer.WorkflowInfo
	t, err = flow.time(ctx, n, func(ctx context.Context, p *producer.Producer) (err error) {
		info, err = p.EnqueueWorkflow(ctx, fanOutWorkflow(n))
		return err
	})
	if err != nil {
		return res, fmt.Errorf("workflow: %w", err)
	}
	res.Workq, res.WorkflowEnqueue = rate(n, t.took), t.enqueue
	s, err := flow.p.Workflow(ctx, info.ID)
	if err != nil {
		return res, err
	}
	if res.Phases, err = checkFanOut(s, t.start, n); err != nil {
		return res, fmt.Errorf("workflow %s: %w", info.ID, err)
	}
	return res, flow.close()
}

// fanOutWorkflow is a workflow of n tasks: root, then 1 … n-2 each after root, then
// last after all of those.
func fanOutWorkflow(n int) *producer.Workflow {
	wf := producer.NewWorkflow("fan").Task(fanRoot, producer.Job{Payload: payload})
	middle := make([]string, n-2)
	for i := range middle {
		middle[i] = strconv.Itoa(i + 1)
		wf.Task(middle[i], producer.Job{Payload: payload}, producer.DependsOn(fanRoot))
	}
	return wf.Task(fanLast, producer.Job{Payload: payload}, producer.DependsOn(middle...))
}

// checkFanOut checks that every task of a fan-out/fan-in workflow ran once, done,
// after its parents committed, and returns when each phase ended.
func checkFanOut(s *producer.WorkflowStatus, start time.Time, n int) (FanOutPhases, error) {
	var ph FanOutPhases
	if s.State != producer.WorkflowDone || len(s.Tasks) != n || s.Counts[producer.StateDone] != n {
		return ph, fmt.Errorf("%s with %d tasks, %v; want done, %d tasks done", s.State, len(s.Tasks), s.Counts, n)
	}
	root, last := s.Task(fanRoot), s.Task(fanLast)
	if root == nil || last == nil {
		return ph, errors.New("no root or last task")
	}
	for _, t := range s.Tasks {
		if t.Attempt != 1 {
			return ph, fmt.Errorf("task %s ran %d times", t.Task, t.Attempt)
		}
		if t == root || t == last {
			continue
		}
		if !t.StartedAt.After(root.FinishedAt) {
			return ph, fmt.Errorf("task %s started at %s, before the root committed at %s", t.Task, t.StartedAt, root.FinishedAt)
		}
		if !last.StartedAt.After(t.FinishedAt) {
			return ph, fmt.Errorf("the last task started at %s, before its parent %s committed at %s", last.StartedAt, t.Task, t.FinishedAt)
		}
		ph.MiddleStarted = max(ph.MiddleStarted, t.StartedAt.Sub(start))
		ph.MiddleDone = max(ph.MiddleDone, t.FinishedAt.Sub(start))
	}
	ph.RootStarted, ph.RootDone = root.StartedAt.Sub(start), root.FinishedAt.Sub(start)
	ph.LastStarted, ph.LastDone = last.StartedAt.Sub(start), last.FinishedAt.Sub(start)
	return ph, nil
}

// timePlain times n jobs without keys or dependencies, enqueued with one
// EnqueueBatch, from its start until the last has committed, on a queue of their own
// (prefix) with a worker of options opts (commitTimer): the baseline of the workflow
// and sequence scenarios.
func timePlain(ctx context.Context, env Env, prefix string, n int, opts []consumer.Option) (timed, error) {
	jobs := make([]producer.Job, n)
	for i := range jobs {
		jobs[i] = producer.Job{Payload: payload}
	}
	plain, err := newCommitTimer(ctx, env, prefix, opts)
	if err != nil {
		return timed{}, err
	}
	defer plain.close()
	t, err := plain.time(ctx, n, func(ctx context.Context, p *producer.Producer) error {
		_, err := p.EnqueueBatch(ctx, jobs)
		return err
	})
	if err != nil {
		return t, err
	}
	return t, plain.close()
}

// commitTimer times jobs from the start of their enqueue until a worker has
// committed the last: a new queue, and a worker with the options given and an empty
// handler, started and warmed by one job before anything is timed.
type commitTimer struct {
	names queue.Names
	js    jetstream.JetStream
	p     *producer.Producer
	w     *consumer.Worker
	stop  func() error
	done  uint64 // jobs committed before the timing (the warm-up's)
}

// newCommitTimer provisions the queue, starts the worker and waits until it has
// committed a first job.
func newCommitTimer(ctx context.Context, env Env, prefix string, opts []consumer.Option) (t *commitTimer, err error) {
	t = &commitTimer{js: env.JS}
	q := queueName(prefix)
	if t.names, err = queue.NamesFor(q); err != nil {
		return nil, err
	}
	if t.p, err = producer.New(ctx, env.JS, q, env.producerOpts()...); err != nil {
		cleanupQueue(env.JS, t.names)
		return nil, err
	}
	if t.w, err = consumer.New(ctx, env.JS, q, empty, opts...); err != nil {
		cleanupQueue(env.JS, t.names)
		return nil, err
	}
	t.stop = startWorker(ctx, t.w)
	if _, err := t.p.Enqueue(ctx, payload); err != nil {
		_ = t.close()
		return nil, err
	}
	if err := t.waitCommitted(ctx, 1); err != nil {
		_ = t.close()
		return nil, fmt.Errorf("warming the worker: %w", err)
	}
	t.done = 1
	return t, nil
}

// timed is what commitTimer.time measured.
type timed struct {
	start         time.Time     // when the enqueue started
	enqueue, took time.Duration // the enqueue; from its start until the last commit
}

// time times enqueue, which enqueues n jobs, from its start until the worker has
// committed all n.
func (t *commitTimer) time(ctx context.Context, n int, enqueue func(context.Context, *producer.Producer) error) (timed, error) {
	var m timed
	m.start = time.Now()
	if err := enqueue(ctx, t.p); err != nil {
		return m, err
	}
	m.enqueue = time.Since(m.start)
	if err := t.waitCommitted(ctx, t.done+uint64(n)); err != nil {
		return m, err
	}
	m.took = time.Since(m.start)
	t.done += uint64(n)
	return m, nil
}

// waitCommitted waits until the worker has committed n jobs, looking every
// millisecond (its own count: no round trip).
func (t *commitTimer) waitCommitted(ctx context.Context, n uint64) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for t.w.Stats().Committed < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the worker committed %d of %d jobs: %w", t.w.Stats().Committed, n, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// close stops the worker, checks that it committed each job once, and deletes the
// queue; it may be called again, and then does nothing.
func (t *commitTimer) close() error {
	if t.stop == nil {
		return nil
	}
	err := t.stop()
	t.stop = nil
	defer cleanupQueue(t.js, t.names)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if c := t.w.Stats().Committed; c != t.done {
		return fmt.Errorf("the worker committed %d jobs, %d were enqueued", c, t.done)
	}
	return nil
}

// WorkflowRelease times the release of a dependent task: a chain of n+1 tasks, each
// depending on the one before, gives n samples of the time from a parent's commit
// (its record's FinishedAt, stamped by the worker just before it writes the record)
// to its dependent's start (StartedAt, stamped as its claim is written). The "raw"
// side is a lone job's enqueue → start (from calling producer.Enqueue to its record's
// StartedAt), n jobs one at a time as the latency scenario enqueues them, on the same
// queue and worker, run before the chain.
func WorkflowRelease(ctx context.Context, env Env, n int) (Latency, error) {
	res := Latency{Scenario: "workflow release vs lone job start (workq)", N: n}
	lone, err := newLoneJobs(ctx, env, empty)
	if err != nil {
		return res, err
	}
	defer lone.stop()
	starts, err := lone.starts(ctx, n)
	if err != nil {
		return res, err
	}

	wf := producer.NewWorkflow("chain").Task("0", producer.Job{Payload: payload})
	for i := 1; i <= n; i++ {
		wf.Task(strconv.Itoa(i), producer.Job{Payload: payload}, producer.DependsOn(strconv.Itoa(i-1)))
	}
	info, err := lone.p.EnqueueWorkflow(ctx, wf)
	if err != nil {
		return res, err
	}
	s, err := lone.p.WaitWorkflow(ctx, info.ID)
	if err != nil {
		return res, err
	}
	if s.State != producer.WorkflowDone || s.Counts[producer.StateDone] != n+1 {
		return res, fmt.Errorf("workflow %s ended %s, %v; want %d tasks done", info.ID, s.State, s.Counts, n+1)
	}
	tasks := make(map[string]*producer.Record, len(s.Tasks))
	for _, t := range s.Tasks {
		tasks[t.Task] = t
	}
	var links []time.Duration
	for i := 1; i <= n; i++ {
		parent, t := tasks[strconv.Itoa(i-1)], tasks[strconv.Itoa(i)]
		d := t.StartedAt.Sub(parent.FinishedAt)
		switch {
		case d <= 0:
			return res, fmt.Errorf("workflow %s: task %s started at %s, before its parent %s committed at %s", info.ID, t.Task, t.StartedAt, parent.Task, parent.FinishedAt)
		case t.Attempt != 1:
			return res, fmt.Errorf("workflow %s: task %s ran %d times", info.ID, t.Task, t.Attempt)
		}
		links = append(links, d)
	}
	res.Workq, res.Raw = percentiles(links), percentiles(starts)
	return res, nil
}
