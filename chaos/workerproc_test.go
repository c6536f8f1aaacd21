//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
)

// The test binary is also the suite's Go worker program. A scenario whose handler
// must be Go code on the consumer package (a workflow's task reads its parents'
// results) runs workers as this binary started again with workerEnv set: real
// processes, SIGKILLed and replaced like `workq work`. TestMain sees the variable
// and runs workerProcess instead of the tests.

// workerEnv names the handler a worker process runs (a key of goHandlers).
const workerEnv = "CHAOS_WORKER"

// goHandlers are the handlers a worker process can run. Each gets the run log to
// append its runs to, one line per run as jobScript writes them (one write(2) each,
// to a file opened with O_APPEND), and the worker's name.
var goHandlers = map[string]func(runLog *os.File, worker string) consumer.Handler{
	"workflow": flowHandler,
}

// goWorker is the program of a workerPool whose workers are this binary running
// handler, with the pool's queue, servers, concurrency and AckWait.
func goWorker(handler string) func(wp *workerPool, w *worker) (env []string, path string, args []string) {
	return func(wp *workerPool, w *worker) ([]string, string, []string) {
		exe, err := os.Executable()
		if err != nil {
			wp.t.Fatal(err)
		}
		return []string{workerEnv + "=" + handler, "CHAOS_URL=" + wp.url, "CHAOS_QUEUE=" + wp.queue, "CHAOS_NAME=" + w.name,
			"CHAOS_CONCURRENCY=" + strconv.Itoa(wp.concurrency), "CHAOS_ACK_WAIT=" + wp.ackWait.String()}, exe, nil
	}
}

// workerProcess runs a worker as its environment says, as `workq work` would with
// the suite's flags (workerPool.launch), until SIGTERM drains it. It logs to stderr
// (the pool's workq-<name>.log) and returns the exit status.
func workerProcess() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fail := func(msg string, args ...any) int {
		log.Error(msg, args...)
		return 1
	}
	handler := goHandlers[os.Getenv(workerEnv)]
	if handler == nil {
		return fail("no such handler", "handler", os.Getenv(workerEnv))
	}
	queue, name := os.Getenv("CHAOS_QUEUE"), os.Getenv("CHAOS_NAME")
	conc, err := strconv.Atoi(os.Getenv("CHAOS_CONCURRENCY"))
	if err != nil {
		return fail("CHAOS_CONCURRENCY", "err", err)
	}
	ackWait, err := time.ParseDuration(os.Getenv("CHAOS_ACK_WAIT"))
	if err != nil {
		return fail("CHAOS_ACK_WAIT", "err", err)
	}
	runLog, err := os.OpenFile(os.Getenv("CHAOS_RUNLOG"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail("run log", "err", err)
	}
	defer runLog.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	nc, err := nats.Connect(os.Getenv("CHAOS_URL"), connectOptions()...)
	if err != nil {
		return fail("connect", "err", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fail("jetstream", "err", err)
	}
	opts := []consumer.Option{consumer.Name(name), consumer.Concurrency(conc), consumer.AckWait(ackWait),
		consumer.MaxAttempts(10), consumer.Backoff(consumer.Exponential(200*time.Millisecond, time.Second)),
		consumer.DrainTimeout(10 * time.Second), consumer.GroupCommit(true), consumer.Logger(log)}
	// Started while a server restarts or a cluster elects, New may fail for a while.
	var w *consumer.Worker
	for deadline := time.Now().Add(time.Minute); ; {
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		w, err = consumer.New(nctx, js, queue, handler(runLog, name), opts...)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fail("worker not created", "queue", queue, "err", err)
		}
		log.Warn("worker not created yet", "queue", queue, "err", err)
		time.Sleep(200 * time.Millisecond)
	}
	log.Info("worker started", "queue", queue, "worker", w.Name(), "concurrency", conc, "ack_wait", ackWait)
	err = w.Run(ctx)
	s := w.Stats()
	log.Info("worker stopped", "committed", s.Committed, "retried", s.Retried, "dead", s.Dead,
		"reassigned", s.Reassigned, "handed_back", s.HandedBack, "errors", s.Errors)
	if err != nil {
		return fail("worker", "err", err)
	}
	return 0
}

// logRun appends the start of a run to runLog as jobScript does ("job attempt worker
// token"), with the start's time in Unix nanoseconds, in one write.
func logRun(runLog *os.File, j *consumer.Job, worker string, token uint64, at time.Time) error {
	_, err := fmt.Fprintf(runLog, "%s %d %s %d %d\n", j.ID(), j.Attempt(), worker, token, at.UnixNano())
	return err
}
