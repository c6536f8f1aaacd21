package producer_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/workq/workq/producer"
)

// Export a producer's metrics and the queue's depth, read from the server at scrape
// time, on a registry of the program's own.
func ExampleNewQueueCollector() {
	js, done := connect()
	defer done()
	ctx := context.Background()

	reg := prometheus.NewRegistry()
	p, err := producer.New(ctx, js, "emails", producer.Metrics(reg))
	if err != nil {
		log.Fatal(err)
	}
	queues, err := producer.NewQueueCollector(js, []string{"emails"})
	if err != nil {
		log.Fatal(err)
	}
	reg.MustRegister(queues)
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) // and serve it

	for range 3 {
		if _, err := p.Enqueue(ctx, []byte("hello")); err != nil {
			log.Fatal(err)
		}
	}
	// What a scrape would see, in short.
	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "workq_jobs_enqueued_total":
			fmt.Println(f.GetName(), f.GetMetric()[0].GetCounter().GetValue())
		case "workq_queue_jobs", "workq_queue_pending":
			fmt.Println(f.GetName(), f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output:
	// workq_jobs_enqueued_total 3
	// workq_queue_jobs 3
	// workq_queue_pending 3
}
