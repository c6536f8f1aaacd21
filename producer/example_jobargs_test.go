package producer_test

import (
	"context"
	"fmt"
	"log"

	"github.com/workq/workq/producer"
)

// Invoice is a job type: its Kind is the job's kind, its JSON the job's payload.
type Invoice struct {
	Number string `json:"number"`
	Cents  int    `json:"cents"`
}

// Kind names Invoice jobs.
func (Invoice) Kind() string { return "invoice" }

// EnqueueArgs enqueues a typed job: JSON-encoded, under its type's kind, which
// consumer.RouteArgs routes to a handler taking an Invoice.
func ExampleProducer_EnqueueArgs() {
	js, done := connect()
	defer done()
	ctx := context.Background()

	p, err := producer.New(ctx, js, "billing")
	if err != nil {
		log.Fatal(err)
	}
	info, err := p.EnqueueArgs(ctx, Invoice{Number: "F-1", Cents: 1990}, producer.ID("invoice-F-1"))
	if err != nil {
		log.Fatal(err)
	}
	rec, err := p.Status(ctx, info.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.ID, rec.Kind, rec.State)
	// Output: invoice-F-1 invoice queued
}

// NewJob makes typed jobs for EnqueueBatch, each with its own options.
func ExampleNewJob() {
	js, done := connect()
	defer done()
	ctx := context.Background()

	p, err := producer.New(ctx, js, "billing")
	if err != nil {
		log.Fatal(err)
	}
	var jobs []producer.Job
	for _, inv := range []Invoice{{"F-2", 500}, {"F-3", 700}} {
		j, err := producer.NewJob(inv, producer.ID("invoice-"+inv.Number))
		if err != nil {
			log.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	results, err := p.EnqueueBatch(ctx, jobs)
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range results {
		fmt.Println(r.ID, jobs[i].Kind, string(jobs[i].Payload))
	}
	// Output:
	// invoice-F-2 invoice {"number":"F-2","cents":500}
	// invoice-F-3 invoice {"number":"F-3","cents":700}
}
