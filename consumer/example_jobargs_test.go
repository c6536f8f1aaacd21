package consumer_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
)

// Welcome is a job type: its Kind routes it, on the producer and the worker alike.
type Welcome struct {
	Email string `json:"email"`
	Name  string `json:"name"`
}

// Kind names Welcome jobs.
func (Welcome) Kind() string { return "welcome" }

// RouteArgs routes jobs by their Go type: the producer enqueues a Welcome, the mux
// hands the handler a Welcome. The kind is written once, in the type's Kind method,
// so a misspelt kind cannot leave jobs without a handler.
func ExampleRouteArgs() {
	js, done := connect()
	defer done()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	mux := consumer.NewMux()
	err := consumer.RouteArgs(mux, func(ctx context.Context, j *consumer.Job, w Welcome) error {
		j.SetResult(fmt.Appendf(nil, "welcomed %s <%s>", w.Name, w.Email))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	p, err := producer.New(ctx, js, "signups")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := p.EnqueueArgs(ctx, Welcome{Email: "ada@example.com", Name: "Ada"}, producer.ID("welcome-ada")); err != nil {
		log.Fatal(err)
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := consumer.New(ctx, js, "signups", mux, consumer.Logger(quiet))
	if err != nil {
		log.Fatal(err)
	}
	go w.Run(ctx)

	rec := waitFor(p, "welcome-ada", producer.StateDone)
	fmt.Println(rec.Kind, string(rec.Result))
	// Output: welcome welcomed Ada <ada@example.com>
}
