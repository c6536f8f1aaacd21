package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/embedded"
	"github.com/workq/workq/producer"
)

// connect starts an embedded server for an example; real programs connect to theirs.
func connect() (jetstream.JetStream, func()) {
	srv, err := embedded.Run()
	if err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		log.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	return js, func() { nc.Close(); srv.Close() }
}

// waitFor polls a job's record until it reaches state (examples only; a real
// program does not poll). After 10 seconds it gives up: it prints why, which fails
// the example's output check, and returns an empty record.
func waitFor(p *producer.Producer, id string, state producer.State) *producer.Record {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		r, err := p.Status(ctx, id)
		if err == nil && r.State == state {
			return r
		}
		select {
		case <-ctx.Done():
			fmt.Printf("gave up waiting for job %s to be %s: record %+v, err %v\n", id, state, r, err)
			return &producer.Record{}
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A worker runs a handler on each job; returning nil commits the job with its result.
func Example() {
	js, done := connect()
	defer done()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	p, err := producer.New(ctx, js, "emails")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("ada@example.com"), producer.ID("welcome-ada")); err != nil {
		log.Fatal(err)
	}

	w, err := consumer.New(ctx, js, "emails", consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		j.SetResult([]byte("sent to " + string(j.Payload())))
		return nil
	}), consumer.Concurrency(4), consumer.AckWait(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	go w.Run(ctx) // blocks until ctx ends; then drains

	rec := waitFor(p, "welcome-ada", producer.StateDone)
	fmt.Println(rec.State, rec.Attempt, string(rec.Result))
	// Output: done 1 sent to ada@example.com
}

// A Mux routes jobs by kind; JSON decodes payloads into a typed value. Unknown kinds
// and malformed JSON fail permanently and go to dead letters with their payload.
func ExampleMux() {
	js, done := connect()
	defer done()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	type resize struct {
		Path  string `json:"path"`
		Width int    `json:"width"`
	}
	mux := consumer.NewMux()
	mux.Route("resize", consumer.JSON(func(ctx context.Context, j *consumer.Job, r resize) error {
		j.SetResult(fmt.Appendf(nil, "%s@%dpx", r.Path, r.Width))
		return nil
	}))

	p, err := producer.New(ctx, js, "images")
	if err != nil {
		log.Fatal(err)
	}
	_, _ = p.Enqueue(ctx, []byte(`{"path":"cat.png","width":128}`), producer.ID("r1"), producer.Kind("resize"))
	_, _ = p.Enqueue(ctx, []byte(`{}`), producer.ID("x1"), producer.Kind("transcode"))

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := consumer.New(ctx, js, "images", mux, consumer.Logger(quiet))
	if err != nil {
		log.Fatal(err)
	}
	go w.Run(ctx)

	fmt.Println(string(waitFor(p, "r1", producer.StateDone).Result))
	fmt.Println(waitFor(p, "x1", producer.StateDead).LastError)
	// Output:
	// cat.png@128px
	// permanent: no handler for job kind "transcode"
}

// ledger is a resource that refuses writes from superseded runs: it remembers the
// highest fencing token it has accepted per job.
type ledger struct {
	mu      sync.Mutex
	highest map[string]uint64
}

var errFenced = errors.New("write from a superseded run")

func (l *ledger) write(job string, token uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if token < l.highest[job] {
		return errFenced
	}
	l.highest[job] = token
	return nil
}

// Handlers that write to an external resource pass the fencing token along, so a
// run that lost its job (a paused or cut-off worker) cannot overwrite the new owner's
// work; Fence checks ownership with the server before an irreversible step.
func ExampleJob_FencingToken() {
	js, done := connect()
	defer done()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	l := &ledger{highest: map[string]uint64{}}
	p, err := producer.New(ctx, js, "payments")
	if err != nil {
		log.Fatal(err)
	}
	_, _ = p.Enqueue(ctx, []byte("42.00"), producer.ID("pay-7"))

	w, err := consumer.New(ctx, js, "payments", consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		token, err := j.FencingToken(ctx)
		if err != nil {
			return err // consumer.ErrStale: another worker owns the job now; or the claim could not be written
		}
		if err := j.Fence(ctx); err != nil {
			return err // checked with the server just before the write
		}
		if err := l.write(j.ID(), token); err != nil {
			return consumer.Permanent(err)
		}
		return nil
	}))
	if err != nil {
		log.Fatal(err)
	}
	go w.Run(ctx)

	waitFor(p, "pay-7", producer.StateDone)
	token := l.highest["pay-7"]
	fmt.Println(token > 0)
	fmt.Println(l.write("pay-7", token-1)) // an earlier claim's token
	// Output:
	// true
	// write from a superseded run
}
