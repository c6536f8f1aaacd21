package producer_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/workq/workq/producer"
)

// Only one report per day at a time, and none again for an hour after it ended: the
// second enqueue with the key is a duplicate naming the job that holds it.
func ExampleUnique() {
	js, done := connect()
	defer done()
	ctx := context.Background()

	p, err := producer.New(ctx, js, "reports")
	if err != nil {
		log.Fatal(err)
	}
	day := producer.Unique("report-2026-11-24")
	first, err := p.Enqueue(ctx, []byte(`{"day":"2026-11-24"}`), producer.ID("report-1"), day, producer.UniqueFor(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.ID, first.Duplicate)

	again, err := p.Enqueue(ctx, []byte(`{"day":"2026-11-24"}`), producer.ID("report-2"), day)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(again.ID, again.Duplicate)
	// Output:
	// report-1 false
	// report-1 true
}
