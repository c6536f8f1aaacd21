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

// Find jobs by state, a page at a time.
func ExampleAdmin_Jobs() {
	js, done := connect()
	defer done()
	ctx := context.Background()
	p, err := producer.New(ctx, js, "emails")
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"mail-1", "mail-2", "mail-3"} {
		if _, err := p.Enqueue(ctx, []byte("hi"), producer.ID(id), producer.Kind("send_email")); err != nil {
			log.Fatal(err)
		}
	}

	a, err := admin.New(js)
	if err != nil {
		log.Fatal(err)
	}
	q := admin.JobQuery{State: producer.StateQueued, Kind: "send_email", Limit: 2}
	for {
		page, err := a.Jobs(ctx, "emails", q)
		if err != nil {
			log.Fatal(err)
		}
		for _, j := range page.Jobs {
			fmt.Println(j.ID, j.State)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	// Output:
	// mail-3 queued
	// mail-2 queued
	// mail-1 queued
}

// Limit a queue across all its workers: 5 jobs at once, 2 of them SMS, 100 starts a
// second. Running workers obey within 2 s.
func ExampleAdmin_SetLimits() {
	js, done := connect()
	defer done()
	ctx := context.Background()
	if _, err := producer.New(ctx, js, "notifications"); err != nil {
		log.Fatal(err)
	}

	a, err := admin.New(js)
	if err != nil {
		log.Fatal(err)
	}
	_, err = a.SetLimits(ctx, "notifications", admin.Limits{
		MaxRunning:       5,
		MaxRunningByKind: map[string]int{"send_sms": 2},
		Rate:             100,
		RateWindow:       admin.Duration(time.Second),
	})
	if err != nil {
		log.Fatal(err)
	}
	qi, err := a.Queue(ctx, "notifications")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(qi.Limits.MaxRunning, qi.Limits.MaxRunningByKind["send_sms"], qi.Limits.Rate, qi.Limits.RateWindow)
	// Output: 5 2 100 1s
}

// Look at a queue's periodic schedules, pause one and remove another.
func ExampleAdmin_Schedules() {
	js, done := connect()
	defer done()
	ctx := context.Background()
	p, err := producer.New(ctx, js, "reports")
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"daily", "hourly"} {
		if _, err := p.Schedule(ctx, name, "@"+name, nil); err != nil {
			log.Fatal(err)
		}
	}

	a, err := admin.New(js)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := a.PauseSchedule(ctx, "reports", "hourly"); err != nil {
		log.Fatal(err)
	}
	if err := a.RemoveSchedule(ctx, "reports", "daily"); err != nil {
		log.Fatal(err)
	}
	ss, err := a.Schedules(ctx, "reports")
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range ss {
		fmt.Println(s.Name, s.Spec, s.Paused)
	}
	// Output: hourly @hourly true
}

// Empty a queue of its waiting jobs, then delete it.
func ExampleAdmin_PurgeQueue() {
	js, done := connect()
	defer done()
	ctx := context.Background()
	p, err := producer.New(ctx, js, "scratch")
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		if _, err := p.Enqueue(ctx, []byte("x")); err != nil {
			log.Fatal(err)
		}
	}

	a, err := admin.New(js)
	if err != nil {
		log.Fatal(err)
	}
	n, err := a.PurgeQueue(ctx, "scratch")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("purged", n)
	if err := a.DeleteQueue(ctx, "scratch"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(errors.Is(a.Exists(ctx, "scratch"), admin.ErrNoQueue))
	// Output:
	// purged 3
	// true
}

// Change the workers' AckWait in place (stop the workers first, start them with the
// new value).
func ExampleAdmin_SetAckWait() {
	js, done := connect()
	defer done()
	ctx := context.Background()
	// A worker's New creates the workers' consumer, with its AckWait.
	if _, err := consumer.New(ctx, js, "emails", consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }),
		consumer.AckWait(30*time.Second)); err != nil {
		log.Fatal(err)
	}

	a, err := admin.New(js)
	if err != nil {
		log.Fatal(err)
	}
	old, err := a.SetAckWait(ctx, "emails", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	qi, err := a.Queue(ctx, "emails")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(old, "→", qi.AckWait)
	// Output: 30s → 1m0s
}

// Follow a workflow task by task, and cancel what of it has not run: a task waits
// until its parents have committed.
func ExampleAdmin_Workflow() {
	js, done := connect()
	defer done()
	ctx := context.Background()
	p, err := producer.New(ctx, js, "orders")
	if err != nil {
		log.Fatal(err)
	}
	wf := producer.NewWorkflow("order-42").
		Task("charge", producer.Job{Payload: []byte("card")}).
		Task("ship", producer.Job{}, producer.DependsOn("charge")).
		Task("email", producer.Job{}, producer.DependsOn("charge", "ship"))
	if _, err := p.EnqueueWorkflow(ctx, wf); err != nil {
		log.Fatal(err)
	}

	a, err := admin.New(js)
	if err != nil {
		log.Fatal(err)
	}
	s, err := a.Workflow(ctx, "orders", "order-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.ID, s.State)
	for _, t := range s.Tasks { // parents first
		fmt.Println(" ", t.Task, t.State, t.WaitingFor)
	}
	s, err = a.CancelWorkflow(ctx, "orders", "order-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.ID, s.State, s.Counts[producer.StateCancelled], "cancelled")
	// Output:
	// order-42 running
	//   charge queued []
	//   ship waiting [charge]
	//   email waiting [charge ship]
	// order-42 failed 3 cancelled
}
