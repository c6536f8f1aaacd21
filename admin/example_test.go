package admin_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/admin"
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

// List the queues and look at one; a queue that does not exist is ErrNoQueue.
func Example() {
	js, done := connect()
	defer done()
	ctx := context.Background()
	p, err := producer.New(ctx, js, "emails")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("hello"), producer.ID("order-42")); err != nil {
		log.Fatal(err)
	}

	a, err := admin.New(js)
	if err != nil {
		log.Fatal(err)
	}
	qs, err := a.Queues(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range qs {
		fmt.Println(q.Name, q.Jobs, q.Pending, q.Paused)
	}
	rec, err := a.Job(ctx, "emails", "order-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.ID, rec.State)
	_, err = a.Queue(ctx, "invoices")
	fmt.Println(errors.Is(err, admin.ErrNoQueue))
	// Output:
	// emails 1 1 false
	// order-42 queued
	// true
}

// Pause a queue during an incident: its workers get no jobs until it is resumed,
// while enqueues go on.
func ExampleAdmin_PauseQueue() {
	js, done := connect()
	defer done()
	ctx := context.Background()
	p, err := producer.New(ctx, js, "emails")
	if err != nil {
		log.Fatal(err)
	}
	ran := make(chan string, 1)
	w, err := consumer.New(ctx, js, "emails", consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		ran <- string(j.Payload())
		return nil
	}), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = w.Run(wctx); close(stopped) }()
	defer func() { stop(); <-stopped }()

	a, err := admin.New(js)
	if err != nil {
		log.Fatal(err)
	}
	if err := a.PauseQueue(ctx, "emails"); err != nil {
		log.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("newsletter")); err != nil {
		log.Fatal(err)
	}
	select {
	case got := <-ran:
		fmt.Println("ran while paused:", got)
	case <-time.After(1500 * time.Millisecond):
		fmt.Println("paused: nothing ran")
	}
	if err := a.ResumeQueue(ctx, "emails"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("resumed, ran:", <-ran)
	// Output:
	// paused: nothing ran
	// resumed, ran: newsletter
}

// Cancel a job wherever it stands; a job that has finished cannot be cancelled.
func ExampleAdmin_CancelJob() {
	js, done := connect()
	defer done()
	ctx := context.Background()
	p, err := producer.New(ctx, js, "emails")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("oops"), producer.ID("sent-by-mistake")); err != nil {
		log.Fatal(err)
	}

	a, err := admin.New(js)
	if err != nil {
		log.Fatal(err)
	}
	rec, err := a.CancelJob(ctx, "emails", "sent-by-mistake")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.ID, rec.State)
	qi, err := a.Queue(ctx, "emails")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs left:", qi.Jobs)
	// Output:
	// sent-by-mistake cancelled
	// jobs left: 0
}

// Look at the dead letters and put them back on the queue.
func ExampleAdmin_RequeueDead() {
	js, done := connect()
	defer done()
	ctx := context.Background()
	p, err := producer.New(ctx, js, "emails")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("bad address"), producer.ID("mail-7")); err != nil {
		log.Fatal(err)
	}
	w, err := consumer.New(ctx, js, "emails", consumer.HandlerFunc(func(context.Context, *consumer.Job) error {
		return consumer.Permanent(errors.New("mailbox does not exist"))
	}), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = w.Run(wctx); close(stopped) }()

	a, err := admin.New(js)
	if err != nil {
		log.Fatal(err)
	}
	var dls []admin.DeadLetter
	for len(dls) == 0 {
		time.Sleep(50 * time.Millisecond)
		if dls, err = a.DeadLetters(ctx, "emails", 10, false); err != nil {
			log.Fatal(err)
		}
	}
	stop()
	<-stopped
	fmt.Println(dls[0].JobID, dls[0].Error)
	requeued, err := a.RequeueDead(ctx, "emails", admin.Selection{IDs: []string{"mail-7"}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("requeued", len(requeued), requeued[0].JobID)
	// Output:
	// mail-7 permanent: mailbox does not exist
	// requeued 1 mail-7
}
