package consumer_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
)

// Workers export their metrics on the program's registry: jobs by outcome and kind,
// handler durations, waits, jobs in flight. Several workers may share a registry.
func ExampleMetrics() {
	js, done := connect()
	defer done()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	reg := prometheus.NewRegistry()
	p, err := producer.New(ctx, js, "thumbs", producer.Metrics(reg))
	if err != nil {
		log.Fatal(err)
	}
	w, err := consumer.New(ctx, js, "thumbs", consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		return nil
	}), consumer.Metrics(reg))
	if err != nil {
		log.Fatal(err)
	}
	go w.Run(ctx)
	if _, err := p.Enqueue(ctx, []byte("cat.png"), producer.ID("t1"), producer.Kind("resize")); err != nil {
		log.Fatal(err)
	}
	waitFor(p, "t1", producer.StateDone)

	// What a scrape sees, once the worker has counted the commit.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		families, err := reg.Gather()
		if err != nil {
			log.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "workq_jobs_processed_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				if v := m.GetCounter().GetValue(); v > 0 {
					labels := ""
					for _, l := range m.GetLabel() {
						labels += fmt.Sprintf(" %s=%s", l.GetName(), l.GetValue())
					}
					fmt.Printf("%s%s %v\n", f.GetName(), labels, v)
					return
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("gave up: the commit was not counted within 10s")
	// Output:
	// workq_jobs_processed_total kind=resize outcome=committed queue=thumbs 1
}
