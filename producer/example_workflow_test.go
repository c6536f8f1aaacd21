package producer_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
)

// A workflow: render the PDF and capture the payment, then send the invoice, which
// reads both results. The worker releases "invoice" when the last of its parents
// commits; WaitWorkflow returns when every task has ended.
func ExampleProducer_EnqueueWorkflow() {
	js, done := connect()
	defer done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	p, err := producer.New(ctx, js, "orders")
	if err != nil {
		log.Fatal(err)
	}
	mux := consumer.NewMux()
	mux.RouteFunc("render", func(ctx context.Context, j *consumer.Job) error {
		j.SetResult([]byte("invoice-42.pdf"))
		return nil
	})
	mux.RouteFunc("charge", func(ctx context.Context, j *consumer.Job) error {
		j.SetResult([]byte("ch_1234"))
		return nil
	})
	mux.RouteFunc("send", func(ctx context.Context, j *consumer.Job) error {
		var parts []string
		for _, parent := range j.Parents() {
			b, err := j.ParentResult(ctx, parent)
			if err != nil {
				return err
			}
			parts = append(parts, parent+"="+string(b))
		}
		j.SetResult([]byte("sent with " + strings.Join(parts, ", ")))
		return nil
	})
	w, err := consumer.New(ctx, js, "orders", mux)
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = w.Run(ctx) }()

	wf := producer.NewWorkflow("order-42").
		Task("render", producer.Job{Kind: "render"}).
		Task("charge", producer.Job{Kind: "charge"}).
		Task("invoice", producer.Job{Kind: "send"}, producer.DependsOn("render", "charge"))
	if _, err := p.EnqueueWorkflow(ctx, wf); err != nil {
		log.Fatal(err)
	}
	s, err := p.WaitWorkflow(ctx, "order-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.State)
	fmt.Println(string(s.Task("invoice").Result))
	// Output:
	// done
	// sent with render=invoice-42.pdf, charge=ch_1234
}
