package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/embedded"
	"github.com/workq/workq/producer"
)

// demoFlags are the flags of `workq demo`.
type demoFlags struct {
	jobs        int
	workers     int
	concurrency int
	ackWait     time.Duration
}

func (a *app) demoCommand() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "See workq's guarantees live, with nothing to set up",
		Long: `Start an embedded server in a temporary directory, enqueue a few thousand jobs
and run several workers, while things go wrong on purpose:

  - a worker freezes past its AckWait: its job moves to another worker, and its
    late commit is refused ("reassigned");
  - a worker dies mid-job: its job is redelivered and completed elsewhere;
  - a flaky job fails twice, then succeeds on retry;
  - a poison job fails every attempt and lands in dead letters;
  - a job delayed by 2s starts on time, and a schedule firing every second
    enqueues a job per firing, fired by the server itself;
  - a job enqueued by mistake is cancelled while it waits, and never runs;
  - an urgent job enqueued behind the backlog starts ahead of it;
  - a workflow renders an invoice and charges the card, then sends the invoice
    once both have committed, and a client waits for its result;
  - the webhooks of two customers, enqueued interleaved in two sequences, run side
    by side, each customer's one at a time and in order.

Ends with a summary (each job committed exactly once, or dead) and removes the
server's data. Exits non-zero if any guarantee did not hold.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			return a.demo(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.jobs, "jobs", 3000, "jobs to enqueue")
	fl.IntVar(&f.workers, "workers", 4, "well-behaved workers (besides the one that stalls and the one that dies)")
	fl.IntVar(&f.concurrency, "concurrency", 8, "jobs each well-behaved worker runs at once")
	fl.DurationVar(&f.ackWait, "ack-wait", 2*time.Second, "AckWait of the demo queue")
	return cmd
}

func (f *demoFlags) validate() error {
	switch {
	case f.jobs < 10:
		return usageError{fmt.Errorf("--jobs %d: want at least 10", f.jobs)}
	case f.workers < 1 || f.concurrency < 1:
		return usageError{errors.New("--workers and --concurrency: want at least 1")}
	case f.ackWait < 500*time.Millisecond:
		return usageError{fmt.Errorf("--ack-wait %s: want at least 500ms", f.ackWait)}
	}
	return nil
}

const (
	demoQueue       = "demo"
	demoMaxAttempts = 3
)

// demo is one run of the demo: its server, workers and what they saw.
type demo struct {
	a     *app
	f     demoFlags
	out   *eventPrinter
	start time.Time

	srv   *embedded.Server
	conns []*nats.Conn

	stallJob, killJob atomic.Value // string: the job each faulty worker had
	killed            sync.Map     // job id → struct{}: jobs the dying worker had started
	stallDone         chan struct{}
	killDone          chan struct{}
	redelivered       atomic.Int64
	workers           []*consumer.Worker

	// Time: a delayed job and a periodic schedule, fired by the server.
	producer     *producer.Producer
	delayedDue   time.Time
	delayedRan   atomic.Bool
	cancelledRan atomic.Bool // the cancelled job ran: a guarantee broken
	// Priority: an urgent job enqueued behind the backlog.
	okStarts     atomic.Int64  // backlog jobs started
	urgentAt     atomic.Int64  // okStarts when the urgent job was stored; -1 before
	urgentAfter  atomic.Int64  // backlog jobs started between its enqueue and its start; -1 before it ran
	ticks        atomic.Int64  // firings of the heartbeat schedule that started
	scheduleDone chan struct{} // closed once the schedule is removed
	// Workflow: how long after the last task's commit Wait returned (ns); -1 before.
	workflowWaited atomic.Int64
}

// demo runs the demo: a server, the jobs, the workers good and faulty, and the
// summary once every job is committed or dead.
func (a *app) demo(ctx context.Context, f demoFlags) error {
	start := time.Now()
	d := &demo{a: a, f: f, out: &eventPrinter{w: a.stdout, start: start}, start: start,
		stallDone: make(chan struct{}), killDone: make(chan struct{}), scheduleDone: make(chan struct{})}
	d.urgentAt.Store(-1)
	d.urgentAfter.Store(-1)
	d.workflowWaited.Store(-1)
	defer d.close()

	srv, err := embedded.Run()
	if err != nil {
		return fmt.Errorf("start the embedded server: %v", err)
	}
	d.srv = srv
	d.out.printf("workq demo: embedded NATS server with JetStream at %s (data in %s, removed at the end)\n", srv.URL(), srv.StoreDir())
	d.out.printf("queue %q: AckWait %s, %d attempts per job, %d workers × %d + one that will stall + one that will die\n\n",
		demoQueue, f.ackWait, demoMaxAttempts, f.workers, f.concurrency)

	js, err := d.jetstream(srv.URL(), "demo producer")
	if err != nil {
		return err
	}
	enqStart := time.Now()
	if err := d.enqueue(ctx, js); err != nil {
		return err
	}
	enqTook := time.Since(enqStart)
	d.out.printf("enqueued %d jobs in %s (%.0f jobs/s)\n\n", f.jobs, enqTook.Round(time.Millisecond), float64(f.jobs)/enqTook.Seconds())

	runCtx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	var wg sync.WaitGroup
	procStart := time.Now()
	if err := d.startWorkers(runCtx, &wg); err != nil {
		return err
	}
	procTook, err := d.wait(ctx, procStart)
	if err != nil {
		return err
	}
	stopWorkers()
	// Workers drain in the background; the dead one may never notice it is dead.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(3 * time.Second):
	}
	return d.summary(ctx, js, procTook)
}

// startWorkers starts the faulty workers, then, once they have frozen and died
// holding their first jobs, the urgent job behind the backlog, then the
// well-behaved workers. The faulty ones come first so that their first jobs are
// early ones.
func (d *demo) startWorkers(ctx context.Context, wg *sync.WaitGroup) error {
	if err := d.startStaller(ctx, wg); err != nil {
		return err
	}
	if err := d.startKiller(ctx, wg); err != nil {
		return err
	}
	if err := d.enqueueUrgent(ctx); err != nil {
		return err
	}
	if err := d.enqueueSequences(ctx, d.producer); err != nil {
		return err
	}
	for i := 1; i <= d.f.workers; i++ {
		if err := d.startWorker(ctx, wg, fmt.Sprintf("w%d", i)); err != nil {
			return err
		}
	}
	return nil
}

// wait shows progress until every job is committed or dead, both faulty workers
// have had their turn and the delayed and periodic jobs have run, and returns how long processing took (first delivery to last
// commit).
func (d *demo) wait(ctx context.Context, procStart time.Time) (time.Duration, error) {
	bar := newProgress(d.a.stderr, int64(d.f.jobs), "processing")
	d.out.setBar(bar)
	deadline := time.Now().Add(90 * time.Second)
	var procTook time.Duration
	for {
		s := d.stats()
		bar.set(min(int(s.Committed+s.Dead), d.f.jobs))
		if int(s.Committed+s.Dead) >= d.f.jobs && procTook == 0 {
			procTook = time.Since(procStart)
		}
		if int(s.Committed+s.Dead) >= d.expected() && closed(d.stallDone) && closed(d.killDone) &&
			d.delayedRan.Load() && closed(d.scheduleDone) && d.urgentAfter.Load() >= 0 && d.workflowWaited.Load() >= 0 {
			break
		}
		if ctx.Err() != nil {
			bar.clear()
			return 0, exitCodeError{code: exitError, msg: "demo interrupted"}
		}
		if time.Now().After(deadline) {
			bar.clear()
			return 0, fmt.Errorf("demo did not finish within 90s: %d committed, %d dead of %d", s.Committed, s.Dead, d.f.jobs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	bar.finish()
	d.out.setBar(nil)
	return procTook, nil
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (d *demo) close() {
	for _, nc := range d.conns {
		nc.Close()
	}
	if d.srv != nil {
		d.srv.Close()
	}
}

func (d *demo) jetstream(url, name string) (jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("connect to the embedded server: %v", err)
	}
	d.conns = append(d.conns, nc)
	return jetstream.New(nc)
}
