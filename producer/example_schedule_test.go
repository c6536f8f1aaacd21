package producer_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/workq/workq/producer"
)

// Delay a job: the server keeps it and fires it at its time. Until then Status
// reports it scheduled, its id is reserved, and Cancel removes it.
func ExampleAfter() {
	js, done := connect()
	defer done()
	ctx := context.Background()

	p, err := producer.New(ctx, js, "reminders")
	if err != nil {
		log.Fatal(err)
	}
	info, err := p.Enqueue(ctx, []byte("call Ada"), producer.ID("remind-ada"), producer.After(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.ID, time.Until(info.ScheduledAt).Round(time.Hour))

	rec, err := p.Status(ctx, "remind-ada")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.State)

	again, err := p.Enqueue(ctx, []byte("call Ada"), producer.ID("remind-ada"), producer.After(2*time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("duplicate:", again.Duplicate)

	rec, err = p.Cancel(ctx, "remind-ada")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.State)
	// Output:
	// remind-ada 1h0m0s
	// scheduled
	// duplicate: true
	// cancelled
}

// A periodic schedule: the server fires one job at every time of the spec, named
// after the schedule and the firing's time.
func ExampleProducer_Schedule() {
	js, done := connect()
	defer done()
	ctx := context.Background()

	p, err := producer.New(ctx, js, "reports")
	if err != nil {
		log.Fatal(err)
	}
	s, err := p.Schedule(ctx, "nightly", "TZ=Europe/Berlin 0 2 * * *", []byte(`{"report":"sales"}`), producer.Kind("report"))
	if err != nil {
		log.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Name, s.Spec, "next at", s.Next.In(berlin).Format("15:04"), "Berlin time")

	if _, err := p.PauseSchedule(ctx, "nightly"); err != nil {
		log.Fatal(err)
	}
	list, err := p.Schedules(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range list {
		fmt.Println(s.Name, "paused:", s.Paused)
	}

	_, err = p.Schedule(ctx, "too-often", "@every 100ms", nil)
	fmt.Println(errors.Is(err, producer.ErrInvalidSchedule))
	// Output:
	// nightly TZ=Europe/Berlin 0 2 * * * next at 02:00 Berlin time
	// nightly paused: true
	// true
}
