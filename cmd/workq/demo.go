package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/embedded"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/faultproxy"
	"github.com/workq/workq/producer"
)

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
  - a poison job fails every attempt and lands in dead letters.

Ends with a summary (each job committed exactly once, or dead) and removes the
server's data. Exits non-zero if any guarantee did not hold.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case f.jobs < 10:
				return usageError{fmt.Errorf("--jobs %d: want at least 10", f.jobs)}
			case f.workers < 1 || f.concurrency < 1:
				return usageError{errors.New("--workers and --concurrency: want at least 1")}
			case f.ackWait < 500*time.Millisecond:
				return usageError{fmt.Errorf("--ack-wait %s: want at least 500ms", f.ackWait)}
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
}

func (a *app) demo(ctx context.Context, f demoFlags) error {
	d := &demo{a: a, f: f, out: &eventPrinter{w: a.stdout}, start: time.Now(),
		stallDone: make(chan struct{}), killDone: make(chan struct{})}
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
	// The faulty workers start first so that their first jobs are early ones.
	if err := d.startStaller(runCtx, &wg); err != nil {
		return err
	}
	if err := d.startKiller(runCtx, &wg); err != nil {
		return err
	}
	for i := 1; i <= f.workers; i++ {
		if err := d.startWorker(runCtx, &wg, fmt.Sprintf("w%d", i)); err != nil {
			return err
		}
	}

	// Wait until every job is committed or dead, and the stalled worker is back.
	bar := newProgress(a.stderr, int64(f.jobs), "processing")
	d.out.bar = bar
	deadline := time.Now().Add(90 * time.Second)
	var s consumer.Stats
	var procTook time.Duration
	for {
		s = d.stats()
		bar.set(int(s.Committed + s.Dead))
		if int(s.Committed+s.Dead) >= f.jobs && procTook == 0 {
			procTook = time.Since(procStart)
		}
		if int(s.Committed+s.Dead) >= f.jobs && closed(d.stallDone) && closed(d.killDone) {
			break
		}
		if ctx.Err() != nil {
			bar.clear()
			return exitCodeError{code: exitError, msg: "demo interrupted"}
		}
		if time.Now().After(deadline) {
			bar.clear()
			return fmt.Errorf("demo did not finish within 90s: %d committed, %d dead of %d", s.Committed, s.Dead, f.jobs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	bar.finish()
	d.out.bar = nil
	stopWorkers()
	// Workers drain in the background; the dead one may never notice it is dead.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(3 * time.Second):
	}
	s = d.stats()

	// Check the outcome against the server, not only the workers' counters.
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	qi, err := admin.Info(octx, js, demoQueue)
	if err != nil {
		return err
	}
	p, err := producer.New(octx, js, demoQueue)
	if err != nil {
		return err
	}
	var notes []string
	if id, _ := d.stallJob.Load().(string); id != "" {
		if rec, err := p.Status(octx, id); err == nil && rec.Worker != nil {
			notes = append(notes, fmt.Sprintf("%s: frozen on w-stall, committed by %s on attempt %d", id, rec.Worker.Name, rec.Attempt))
		}
	}
	if id, _ := d.killJob.Load().(string); id != "" {
		if rec, err := p.Status(octx, id); err == nil && rec.Worker != nil {
			notes = append(notes, fmt.Sprintf("%s: lost when w-kill died, committed by %s on attempt %d", id, rec.Worker.Name, rec.Attempt))
		}
	}

	wall := time.Since(d.start)
	fmt.Fprintln(a.stdout)
	t := newTable(a.stdout, "SUMMARY", "", "")
	t.row("jobs", f.jobs, "enqueued")
	t.row("committed", s.Committed, "each exactly once")
	t.row("retried", s.Retried, "failed attempts scheduled again")
	t.row("reassigned", s.Reassigned, "late commits refused")
	t.row("redelivered", s.Redelivered, "deliveries after a stall, a death or a retry")
	t.row("dead", s.Dead, fmt.Sprintf("in dead letters (%d)", qi.Dead))
	t.row("throughput", fmt.Sprintf("%.0f jobs/s", float64(f.jobs)/procTook.Seconds()), "first delivery to last commit, waits for AckWait included")
	t.row("wall time", wall.Round(10*time.Millisecond), "server start to summary")
	_ = t.flush()
	for _, n := range notes {
		fmt.Fprintln(a.stdout, "  "+n)
	}

	var problems []string
	if int(s.Committed+s.Dead) != f.jobs {
		problems = append(problems, fmt.Sprintf("%d committed + %d dead ≠ %d jobs", s.Committed, s.Dead, f.jobs))
	}
	if s.Reassigned < 1 {
		problems = append(problems, "the stalled worker's commit was not refused")
	}
	if s.Dead != 1 || qi.Dead != 1 {
		problems = append(problems, fmt.Sprintf("%d dead (%d dead letters), want 1", s.Dead, qi.Dead))
	}
	if qi.Jobs != 0 {
		problems = append(problems, fmt.Sprintf("%d jobs left in the queue", qi.Jobs))
	}
	if len(problems) > 0 {
		return fmt.Errorf("demo: guarantees not met: %s", strings.Join(problems, "; "))
	}
	fmt.Fprintf(a.stdout, "\nEvery job ran to one committed result or a dead letter. Next: 'workq server', then 'workq enqueue' and 'workq work'.\n")
	return nil
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

// enqueue puts the demo's jobs on the queue, the special ones first.
func (d *demo) enqueue(ctx context.Context, js jetstream.JetStream) error {
	p, err := producer.New(ctx, js, demoQueue)
	if err != nil {
		return err
	}
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
	return nil
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

// startStaller starts w-stall, whose link to the server freezes (a proxy stops
// forwarding) during its first job for three times AckWait — as a long GC pause, a
// swapped-out process or a network partition would. The job moves on to another
// worker; when w-stall comes back and commits, the commit is refused.
func (d *demo) startStaller(ctx context.Context, wg *sync.WaitGroup) error {
	proxy, err := faultproxy.New(d.srv.URL())
	if err != nil {
		return err
	}
	js, err := d.jetstream(proxy.URL(), "demo w-stall")
	if err != nil {
		return err
	}
	var once sync.Once
	normal := d.handle("w-stall")
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		first := false
		once.Do(func() { first = true })
		if !first {
			return normal(ctx, j)
		}
		defer close(d.stallDone)
		_, _ = j.FencingToken(ctx) // claim the job now, as a long job would have
		d.stallJob.Store(j.ID())
		stall := 2*d.f.ackWait + d.f.ackWait/4
		d.out.event("⏸", "w-stall freezes for %s while running %s (AckWait is %s)", stall, j.ID(), d.f.ackWait)
		proxy.Pause()
		time.Sleep(stall)
		proxy.Resume()
		d.out.event("▶", "w-stall wakes up and tries to commit %s", j.ID())
		return nil // the commit is refused: the job was reassigned
	})
	w, err := consumer.New(ctx, js, demoQueue, h, d.workerOptions("w-stall", 1, d.out.logger())...)
	if err != nil {
		return err
	}
	d.workers = append(d.workers, w)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer proxy.Close()
		_ = w.Run(ctx)
	}()
	return nil
}

// startKiller starts w-kill, which dies during its first job: its connection is
// closed mid-job with nothing acknowledged, as when a process is killed.
func (d *demo) startKiller(ctx context.Context, wg *sync.WaitGroup) error {
	nc, err := nats.Connect(d.srv.URL(), nats.Name("demo w-kill"), nats.NoReconnect())
	if err != nil {
		return err
	}
	d.conns = append(d.conns, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	var once sync.Once
	dead := make(chan struct{})
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		select {
		case <-dead:
			return errors.New("dead")
		default:
		}
		_, _ = j.FencingToken(ctx) // the claim is written: this run counts as attempt 1
		d.killed.Store(j.ID(), struct{}{})
		once.Do(func() {
			d.killJob.Store(j.ID())
			d.out.event("💥", "w-kill dies while running %s (connection gone, nothing acknowledged)", j.ID())
			nc.Close()
			close(dead)
			close(d.killDone)
		})
		return errors.New("dead")
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := consumer.New(ctx, js, demoQueue, h, d.workerOptions("w-kill", 2, quiet)...)
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Run(ctx) }() // its counters stay out of the totals
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

// eventPrinter prints the demo's events between redraws of the progress bar.
type eventPrinter struct {
	mu  sync.Mutex
	w   io.Writer
	bar *progress
}

func (p *eventPrinter) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.clear()
	}
	fmt.Fprintf(p.w, format, args...)
}

func (p *eventPrinter) event(icon, format string, args ...any) {
	p.printf("  %6.2fs  %s %s\n", time.Since(demoStart).Seconds(), icon, fmt.Sprintf(format, args...))
}

var demoStart = time.Now()

// logger turns the workers' log lines about reassigned and dead jobs into events.
func (p *eventPrinter) logger() *slog.Logger { return slog.New(&eventHandler{p: p}) }

type eventHandler struct {
	p     *eventPrinter
	attrs []slog.Attr
}

func (h *eventHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *eventHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{}
	for _, a := range h.attrs {
		attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	switch {
	case strings.HasSuffix(r.Message, "was reassigned"):
		h.p.event("✗", "%s: %s — its late commit is refused (another worker owns the job)", attrs["worker"], r.Message)
	case strings.HasSuffix(r.Message, "moved to dead letters"):
		h.p.event("☠", "%s: %s after %s attempts (%s)", attrs["worker"], r.Message, attrs["attempt"], attrs["reason"])
	default:
		h.p.event("!", "%s: %s %v", attrs["worker"], r.Message, attrs)
	}
	return nil
}

func (h *eventHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &eventHandler{p: h.p, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *eventHandler) WithGroup(string) slog.Handler { return h }
