// Command quickstart runs workq end to end on an embedded nats-server: it enqueues a
// batch of jobs, runs two worker pools on them, and prints what happened — including
// a job that fails once and is retried, and one that fails for good and lands in the
// dead-letter stream. No setup: go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

const jobs = 2000

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	srv, err := testenv.Run() // embedded server, temporary store, loopback only
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Println("embedded nats-server at", srv.URL())
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}

	p, err := producer.New(ctx, js, "quickstart")
	if err != nil {
		return err
	}
	batch := make([]producer.Job, jobs)
	for i := range batch {
		batch[i] = producer.Job{ID: "job-" + strconv.Itoa(i), Payload: []byte(strconv.Itoa(i))}
	}
	batch[7].ID, batch[9].ID = "flaky", "doomed"
	start := time.Now()
	if _, err := p.EnqueueBatch(ctx, batch); err != nil {
		return err
	}
	fmt.Printf("enqueued %d jobs in %s\n", jobs, time.Since(start).Round(time.Millisecond))

	var done atomic.Int64
	handler := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		switch {
		case j.ID() == "flaky" && j.Attempt() == 1:
			return errors.New("flaky dependency timed out")
		case j.ID() == "doomed":
			return consumer.Permanent(errors.New("payload rejected"))
		}
		j.SetResult([]byte("ok"))
		done.Add(1)
		return nil
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	wctx, stop := context.WithCancel(ctx)
	var workers []*consumer.Worker
	errc := make(chan error, 2)
	for _, name := range []string{"pool-a", "pool-b"} {
		w, err := consumer.New(ctx, js, "quickstart", handler, consumer.Name(name), consumer.Concurrency(16),
			consumer.Backoff(consumer.Constant(200*time.Millisecond)), consumer.Logger(quiet))
		if err != nil {
			stop()
			return err
		}
		workers = append(workers, w)
		go func() { errc <- w.Run(wctx) }()
	}
	for done.Load() < jobs-1 {
		select {
		case <-ctx.Done():
			stop()
			return fmt.Errorf("jobs not done in time: %d of %d", done.Load(), jobs-1)
		case <-time.After(20 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	stop()
	for range workers {
		if err := <-errc; err != nil {
			return err
		}
	}
	for _, w := range workers {
		s := w.Stats()
		fmt.Printf("%s: committed %d, retried %d, dead %d, reassigned %d\n", w.Name(), s.Committed, s.Retried, s.Dead, s.Reassigned)
	}
	for _, id := range []string{"job-0", "flaky", "doomed"} {
		r, err := p.Status(ctx, id)
		if err != nil {
			return err
		}
		fmt.Printf("job %-6s %-5s attempt %d by %s  %s\n", id, r.State, r.Attempt, r.Worker.Name, r.LastError)
	}
	fmt.Printf("%d jobs processed in %s (%.0f jobs/s)\n", jobs, elapsed.Round(time.Millisecond), jobs/elapsed.Seconds())
	return nil
}
