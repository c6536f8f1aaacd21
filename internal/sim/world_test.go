package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/producer"
)

// The simulated world's settings, on the virtual clock.
const (
	queueName   = "sim"
	ackWait     = 2 * time.Second
	maxAttempts = 3
	backoff     = 200 * time.Millisecond
	window      = 4 * time.Second  // the queue's duplicate window
	faultsFor   = 20 * time.Second // faults happen in the first faultsFor only
)

// world is one simulated history: a server, the worker processes, one producer, and
// the seed's choices.
type world struct {
	seed    int64
	rng     *rand.Rand
	rngMu   sync.Mutex
	eng     *engine
	hist    *history
	ctx     context.Context
	workers []*process
	wg      sync.WaitGroup
	jobs    []*plannedJob
	admin   jetstream.JetStream
	names   queue.Names
	nextPID int
	copies  []*jetstream.RawStreamMsg // messages seen in the stream, to send again (sendCopy)
	mu      sync.Mutex
	removed map[string]bool // jobs whose message an operator removed (removeMessage); guarded by mu
	verbose bool            // the workers log into the history, at debug level
}

// historyWriter writes a worker's log lines into the history.
type historyWriter struct {
	h    *history
	name string
}

func (hw historyWriter) Write(b []byte) (int, error) {
	hw.h.note("log   %s: %s", hw.name, strings.TrimSpace(string(b)))
	return len(b), nil
}

// intn is the seed's choice in [0, n).
func (w *world) intn(n int) int {
	w.rngMu.Lock()
	defer w.rngMu.Unlock()
	return w.rng.IntN(n)
}

// between is a duration in [lo, hi).
func (w *world) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.intn(int(hi-lo)/int(time.Millisecond)))*time.Millisecond
}

// plannedJob is one enqueue the producer makes and how its handler behaves.
type plannedJob struct {
	id       string
	at       time.Duration // when it is enqueued
	work     time.Duration // how long each run works
	fails    int           // runs that fail before one succeeds
	panics   bool          // the failing runs panic instead
	sequence string        // its sequence key, if any
	again    time.Duration // enqueue the same id again this long after the first (0: not)
	cancelAt time.Duration // cancel it this long after its enqueue (0: not)
	workflow string        // the workflow it is a task of, if any (its id is workflow.task)
	parents  []string      // the ids of the tasks it waits for
	// removeOnFail: an operator removes its message during the backoff after its
	// first run fails.
	removeOnFail bool
}

// process is one worker process: its connection, its worker, and whether it is
// frozen or dead.
type process struct {
	name string
	cl   *client
	nc   *nats.Conn
	w    *consumer.Worker
	stop context.CancelFunc
	done chan struct{}
	dead chan struct{} // closed when the process dies
}

func (p *process) isDead() bool {
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}

// startWorker starts a worker process.
func (w *world) startWorker() (*process, error) {
	w.nextPID++
	p := &process{name: "w" + strconv.Itoa(w.nextPID), done: make(chan struct{}), dead: make(chan struct{})}
	p.cl = w.eng.newClient(p.name)
	nc, err := p.cl.connect()
	if err != nil {
		return nil, err
	}
	p.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error { return w.handle(ctx, p, j) })
	var logs slog.Handler = slog.NewTextHandler(io.Discard, nil)
	if w.verbose {
		logs = slog.NewTextHandler(historyWriter{w.hist, p.name}, &slog.HandlerOptions{Level: slog.LevelDebug,
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}})
	}
	wk, err := consumer.New(w.ctx, js, queueName, h, consumer.Name(p.name), consumer.Concurrency(2),
		consumer.AckWait(ackWait), consumer.MaxAttempts(maxAttempts), consumer.Backoff(consumer.Constant(backoff)),
		consumer.DrainTimeout(time.Second), consumer.Logger(slog.New(logs)))
	if err != nil {
		return nil, err
	}
	p.w = wk
	ctx, cancel := context.WithCancel(w.ctx)
	p.stop = cancel
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer close(p.done)
		_ = wk.Run(ctx)
	}()
	w.workers = append(w.workers, p)
	w.hist.note("start %s", p.name)
	return p, nil
}

// kill ends a worker process at once: no more writes, no more handler work.
func (w *world) kill(p *process) {
	w.hist.note("kill  %s", p.name)
	close(p.dead)
	p.cl.kill()
	p.nc.Close()
	p.stop()
	<-p.done
}

// handle is every job's handler: it works as its plan says, on the bubble's clock,
// stands still while its process is frozen and stops when the process dies.
func (w *world) handle(ctx context.Context, p *process, j *consumer.Job) error {
	plan := w.plan(j.ID())
	r := &run{job: j.ID(), enqueue: j.Header().Get(queue.HeaderEnqueue), worker: p.name, attempt: j.Attempt(), started: time.Now()}
	if p.isDead() {
		return errors.New("dead")
	}
	w.hist.begin(r)
	for left := plan.work; left > 0; {
		step := min(left, 100*time.Millisecond)
		select {
		case <-time.After(step):
		case <-p.dead:
			w.hist.end(r, "died")
			return errors.New("dead")
		case <-ctx.Done():
			w.hist.end(r, "stopped")
			return context.Cause(ctx)
		}
		left -= step
		select {
		case <-p.cl.gate(): // frozen processes do not work
		case <-p.dead:
			w.hist.end(r, "died")
			return errors.New("dead")
		}
	}
	if p.isDead() {
		w.hist.end(r, "died")
		return errors.New("dead")
	}
	if j.Attempt() <= plan.fails {
		if plan.removeOnFail && j.Attempt() == 1 {
			seq := j.Sequence()
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				time.Sleep(backoff / 2)
				w.removeMessage(seq)
			}()
		}
		if plan.panics {
			w.hist.end(r, "panic")
			panic("sim: planned panic")
		}
		w.hist.end(r, "error")
		return fmt.Errorf("sim: planned failure %d", j.Attempt())
	}
	j.SetResult([]byte(r.enqueue))
	w.hist.end(r, "ok")
	return nil
}

func (w *world) plan(id string) *plannedJob {
	for _, j := range w.jobs {
		if j.id == id {
			return j
		}
	}
	return &plannedJob{id: id}
}

// planJobs draws the seed's workload.
func (w *world) planJobs() {
	n := 4 + w.intn(6)
	for i := range n {
		j := &plannedJob{id: "job-" + strconv.Itoa(i), at: w.between(0, faultsFor/2), work: w.between(10*time.Millisecond, 3*ackWait)}
		switch w.intn(8) {
		case 0:
			j.fails = 1 + w.intn(maxAttempts) // some fail for good
			j.panics = w.intn(2) == 0
		case 1, 7:
			j.again = w.between(time.Second, 2*window) // half of them within the window
			if w.intn(3) == 0 {
				// An operator removes its message as its first run fails: its
				// record stays retrying, with no message, when it is enqueued again.
				j.fails, j.removeOnFail = maxAttempts, true
			}
		case 2, 3:
			j.sequence = "key-" + strconv.Itoa(w.intn(2))
		}
		if w.intn(6) == 0 {
			j.cancelAt = w.between(0, j.work+ackWait)
		}
		w.jobs = append(w.jobs, j)
	}
	// A workflow: a diamond, a → (b, c) → d.
	if w.intn(2) == 0 {
		at := w.between(0, faultsFor/2)
		task := func(name string, parents ...string) *plannedJob {
			j := &plannedJob{id: "flow." + name, workflow: "flow", at: at, work: w.between(10*time.Millisecond, 2*ackWait)}
			for _, p := range parents {
				j.parents = append(j.parents, "flow."+p)
			}
			if w.intn(5) == 0 {
				j.fails = 1 + w.intn(maxAttempts)
			}
			return j
		}
		w.jobs = append(w.jobs, task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c"))
	}
}

// produce enqueues the planned jobs at their times, retrying each enqueue until the
// server takes it (a lost reply is retried as a user would: the same id again), and
// cancels the jobs planned to be.
func (w *world) produce(p *producer.Producer) {
	flows := map[string][]*plannedJob{}
	for _, j := range w.jobs {
		if j.workflow != "" {
			flows[j.workflow] = append(flows[j.workflow], j)
			continue
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			time.Sleep(j.at)
			w.enqueue(p, j)
			first := w.capture(j.id) // a copy of it comes back after its cancel, or its next enqueue
			if j.cancelAt > 0 {
				time.Sleep(j.cancelAt)
				w.cancel(p, j.id)
				time.Sleep(w.between(0, ackWait))
				w.resend(first)
			}
			if j.again > 0 {
				time.Sleep(j.again)
				w.enqueue(p, j)
				// Past the window, or the server refuses the copy as a repeat of
				// the second enqueue's message id.
				time.Sleep(window + w.between(0, 2*ackWait))
				w.resend(first)
			}
		}()
	}
	for id, tasks := range flows {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			time.Sleep(tasks[0].at)
			w.enqueueFlow(p, id, tasks)
		}()
	}
}

func (w *world) cancel(p *producer.Producer, id string) {
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	_, err := p.Cancel(ctx, id)
	w.hist.note("cancel %s: %v", id, err)
}

func (w *world) enqueueFlow(p *producer.Producer, id string, tasks []*plannedJob) {
	for w.ctx.Err() == nil {
		wf := producer.NewWorkflow(id)
		for _, t := range tasks {
			var deps []string
			for _, par := range t.parents {
				deps = append(deps, strings.TrimPrefix(par, id+"."))
			}
			wf.Task(strings.TrimPrefix(t.id, id+"."), producer.Job{}, producer.DependsOn(deps...))
		}
		ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
		_, err := p.EnqueueWorkflow(ctx, wf)
		cancel()
		if err == nil || errors.Is(err, producer.ErrWorkflowExists) {
			w.hist.note("enqueued workflow %s: %v", id, err)
			return
		}
		w.hist.note("enqueue workflow %s: %v", id, err)
		time.Sleep(100 * time.Millisecond)
	}
}

func (w *world) enqueue(p *producer.Producer, j *plannedJob) {
	opts := []producer.EnqueueOption{producer.ID(j.id)}
	if j.sequence != "" {
		opts = append(opts, producer.Sequence(j.sequence))
	}
	for w.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
		info, err := p.Enqueue(ctx, nil, opts...)
		cancel()
		if err == nil {
			w.hist.note("enqueued %s duplicate=%v", j.id, info.Duplicate)
			return
		}
		w.hist.note("enqueue %s: %v", j.id, err)
		time.Sleep(100 * time.Millisecond)
	}
}
