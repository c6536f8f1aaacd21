package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A run cut off from the server after its claim landed counts: the next worker waits
// for the claim's lease to stand unrenewed, takes the job over and runs attempt 2.
func TestCutOffRunCountsAttempt(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	jsA, px := proxiedJS(t, env)
	const q = "cutoff-lazy"
	p := newProducer(t, js, q)
	opts := []consumer.Option{consumer.AckWait(time.Second), consumer.Concurrency(1), consumer.DrainTimeout(100 * time.Millisecond)}

	startedA := make(chan int, 1)
	wA := newWorker(t, jsA, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		px.Pause() // cut off at once: no renewal, no commit reaches the server
		startedA <- j.Attempt()
		<-ctx.Done()
		return context.Cause(ctx)
	}), append(opts, consumer.Name("A"))...)
	runWorker(t, wA)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("x"), producer.ID("job")); err != nil {
		t.Fatal(err)
	}
	if a := <-startedA; a != 1 {
		t.Fatalf("A ran attempt %d, want 1", a)
	}

	runs := &runLog{}
	wB := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		runs.add(j.ID(), j.Attempt())
		return nil
	}), append(opts, consumer.Name("B"))...)
	runWorker(t, wB)
	testenv.Eventually(t, 15*time.Second, "job done by B", func() bool {
		return status(t, p, "job").State == producer.StateDone
	})
	if got := runs.runs("job"); !slices.Equal(got, []int{2}) {
		t.Fatalf("B ran attempts %v, want [2]: A's run, cut off after its claim landed, counts", got)
	}
	if r := status(t, p, "job"); r.Attempt != 2 {
		t.Fatalf("record says attempt %d, want 2", r.Attempt)
	}
}

// Deliveries a stopping worker hands back unstarted are written to the job record and
// do not count as attempts: with MaxAttempts(1), every job a stopped worker held in
// its buffer still runs once on the next worker.
func TestHandedBackJobsDoNotCountAttempts(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "handback"
	p := newProducer(t, js, q)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	wA := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if j.ID() == "slow" {
			started <- struct{}{}
			<-release
		}
		return nil
	}), consumer.Concurrency(1), consumer.Prefetch(5), consumer.MaxAttempts(1), consumer.Name("A"))
	stopA := runWorker(t, wA)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("x"), producer.ID("slow")); err != nil {
		t.Fatal(err)
	}
	<-started
	ids := enqueueN(t, p, 5, "held")
	ctx := testenv.Context(t, 10*time.Second)
	c, err := js.Consumer(ctx, "WORKQ_"+q, "workers")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "A to hold all 5 jobs in its buffer", func() bool {
		info, err := c.Info(ctx)
		return err == nil && info.NumAckPending == 6
	})
	go func() { // the running job finishes once A has handed back its buffer
		for wA.Stats().HandedBack < 5 {
			time.Sleep(5 * time.Millisecond)
		}
		close(release)
	}()
	stopA()
	if got := wA.Stats().HandedBack; got != 5 {
		t.Fatalf("A handed back %d jobs, want the 5 it held", got)
	}

	runs := &runLog{}
	wB := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		runs.add(j.ID(), j.Attempt())
		return nil
	}), consumer.MaxAttempts(1), consumer.Name("B"))
	runWorker(t, wB)
	for _, id := range ids {
		testenv.Eventually(t, 10*time.Second, id+" done", func() bool { return status(t, p, id).State == producer.StateDone })
		if got := runs.runs(id); !slices.Equal(got, []int{1}) {
			t.Errorf("%s ran attempts %v on B, want [1]: a hand-back is not an attempt", id, got)
		}
	}
}

// poisonEnv names the environment of the worker processes of
// TestPoisonJobKillingItsWorkers.
const (
	poisonURL  = "WORKQ_TEST_POISON_URL"
	poisonRuns = "WORKQ_TEST_POISON_RUNS"
)

// TestPoisonWorkerProcess is the worker process of TestPoisonJobKillingItsWorkers
// (the test binary run again): it appends "id attempt" to the runs file for every run
// it starts, and kills itself with SIGKILL on the job whose payload is "poison", at
// once, before anything is written — as a Go fatal error, an OOM kill or a segfault
// in a cgo library would.
func TestPoisonWorkerProcess(t *testing.T) {
	t.Parallel()
	url := os.Getenv(poisonURL)
	if url == "" {
		t.Skip("the worker process of TestPoisonJobKillingItsWorkers")
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := os.OpenFile(os.Getenv(poisonRuns), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	w, err := consumer.New(ctx, js, "poison", consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if _, err := fmt.Fprintf(runs, "%s %d\n", j.ID(), j.Attempt()); err != nil {
			return err
		}
		if string(j.Payload()) == "poison" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}), consumer.AckWait(time.Second), consumer.MaxAttempts(3), consumer.Concurrency(1), consumer.Prefetch(0), consumer.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// A job that kills its worker process at once — before its lazy claim is written —
// runs exactly MaxAttempts times, each on a new worker process, then lands in dead
// letters with a reason saying its workers died; every other job of the queue is done.
func TestPoisonJobKillingItsWorkers(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "poison"
	p := newProducer(t, js, q)
	before := enqueueN(t, p, 5, "before")
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("poison"), producer.ID("poison")); err != nil {
		t.Fatal(err)
	}
	after := enqueueN(t, p, 5, "after")
	runsFile := t.TempDir() + "/runs"

	deaths := 0
	deadline := time.Now().Add(90 * time.Second)
	for {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPoisonWorkerProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), poisonURL+"="+env.URL(), poisonRuns+"="+runsFile)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var err error
		dead := false
		for !dead {
			select {
			case err = <-exited:
				dead = true
			case <-time.After(50 * time.Millisecond):
			}
			if !dead && status(t, p, "poison").State == producer.StateDead {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				if err := <-exited; err != nil {
					t.Fatalf("last worker process: %v", err)
				}
				goto checks
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("the poison job is not dead after %d worker deaths: %+v", deaths, status(t, p, "poison"))
			}
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("worker process ended with %v, want killed by the poison job", err)
		}
		deaths++
	}
checks:
	b, err := os.ReadFile(runsFile)
	if err != nil {
		t.Fatal(err)
	}
	var poisonRuns []int
	others := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		id, a, _ := strings.Cut(line, " ")
		n, _ := strconv.Atoi(a)
		if id == "poison" {
			poisonRuns = append(poisonRuns, n)
		} else {
			others[id]++
		}
	}
	if !slices.Equal(poisonRuns, []int{1, 2, 3}) || deaths != 3 {
		t.Fatalf("poison ran attempts %v and killed %d workers, want attempts [1 2 3] and 3 deaths", poisonRuns, deaths)
	}
	dl := deadLetters(t, js, q)
	if len(dl) != 1 || dl[0].Header.Get("Workq-Job-Id") != "poison" || dl[0].Header.Get("Workq-Attempts") != "3" ||
		!strings.Contains(dl[0].Header.Get("Workq-Error"), "did not finish: the worker died") {
		for _, m := range dl {
			t.Logf("dead letter: %v", m.Header)
		}
		t.Fatalf("want one dead letter for poison after 3 attempts saying its workers died")
	}
	// A job the worker had just finished may run again when the poison kills the
	// worker before that job's commit lands (commits are written in the background
	// while the slot moves on): at most once more per death, and done in the end.
	for _, id := range append(before, after...) {
		if r := status(t, p, id); r.State != producer.StateDone || others[id] < 1 || others[id] > 1+deaths {
			t.Errorf("%s: %s after %d runs, want done after 1 to %d", id, r.State, others[id], 1+deaths)
		}
	}
}

// Attempts count runs, not deliveries: a delivery that left no claim never ran a
// handler (a run is claimed before it starts), so it is not an attempt. With
// MaxAttempts(2), a job delivered twice and put back without a claim runs once, as
// attempt 1 (finding 6 of issue 24: attempts were taken from JetStream's delivery
// count, which a crash or a consumer reset also moves back).
func TestDeliveriesWithoutAClaimAreNotAttempts(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "untraced"
	p := newProducer(t, js, q)
	var runs atomic.Int64
	w := newWorker(t, js, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error {
		runs.Add(1)
		return nil
	}), consumer.MaxAttempts(2), consumer.AckWait(time.Second))
	ctx := testenv.Context(t, 20*time.Second)
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID("job")); err != nil {
		t.Fatal(err)
	}
	// Two deliveries through the workers' own consumer, put back without a claim.
	c, err := js.Consumer(ctx, "WORKQ_"+q, "workers")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		batch, err := c.Fetch(1, jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		msg := <-batch.Messages()
		if msg == nil {
			t.Fatalf("delivery %d: %v", i+1, batch.Error())
		}
		if err := msg.Nak(); err != nil {
			t.Fatal(err)
		}
	}
	runWorker(t, w)
	testenv.Eventually(t, 15*time.Second, "the job done", func() bool { return status(t, p, "job").State == producer.StateDone })
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
	if r := status(t, p, "job"); r.Attempt != 1 {
		t.Fatalf("record %+v: want attempt 1", r)
	}
}
