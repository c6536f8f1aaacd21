package producer_test

import (
	"context"
	"fmt"
	"log"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// Enqueue a job with an id: the same id again within the duplicate window is not
// stored twice, and Status finds the job while it waits.
func Example() {
	js, done := connect()
	defer done()
	ctx := context.Background()

	p, err := producer.New(ctx, js, "emails")
	if err != nil {
		log.Fatal(err)
	}
	info, err := p.Enqueue(ctx, []byte(`{"to":"ada@example.com"}`), producer.ID("order-42"), producer.Kind("send_email"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.ID, info.Duplicate)

	again, err := p.Enqueue(ctx, []byte(`{"to":"ada@example.com"}`), producer.ID("order-42"), producer.Kind("send_email"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(again.Duplicate, again.Sequence == info.Sequence)

	rec, err := p.Status(ctx, "order-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.State, rec.Kind)
	// Output:
	// order-42 false
	// true true
	// queued send_email
}

// EnqueueBatch pipelines many publishes and reports each job's outcome.
func ExampleProducer_EnqueueBatch() {
	js, done := connect()
	defer done()
	ctx := context.Background()

	p, err := producer.New(ctx, js, "thumbnails")
	if err != nil {
		log.Fatal(err)
	}
	jobs := []producer.Job{
		{ID: "img-1", Payload: []byte("a.png")},
		{ID: "img-2", Payload: []byte("b.png"), Kind: "resize"},
		{ID: "bad\nid", Payload: []byte("c.png")}, // control characters are not allowed in ids
	}
	results, err := p.EnqueueBatch(ctx, jobs)
	fmt.Println("batch error:", err != nil)
	for _, r := range results {
		fmt.Println(r.ID, r.Err == nil)
	}
	// Output:
	// batch error: true
	// img-1 true
	// img-2 true
	// bad
	// id false
}
