package admin_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Listing queues while others are created and deleted lists what exists: a queue
// deleted between the listing and the reading of its state is left out, not an
// error (the dashboard's queues page answered 502 in a CI run while another test
// deleted its queue).
func TestQueuesWhileQueuesComeAndGo(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	a := adm(t, js)
	ctx := testenv.Context(t, 60*time.Second)
	if _, err := producer.New(ctx, js, "stays"); err != nil {
		t.Fatal(err)
	}
	churn, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		for i := 0; churn.Err() == nil; i++ {
			q := fmt.Sprint("churn", i%4)
			p, err := producer.New(churn, js, q)
			if err == nil {
				_, err = p.Enqueue(churn, nil)
			}
			if err == nil {
				err = a.DeleteQueue(churn, q)
			}
			if err != nil && churn.Err() == nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	deadline := time.Now().Add(5 * time.Second)
	lists := 0
	for time.Now().Before(deadline) {
		qs, err := a.Queues(ctx)
		if err != nil {
			t.Fatalf("Queues while queues come and go (after %d lists): %v", lists, err)
		}
		lists++
		found := false
		for _, q := range qs {
			found = found || q.Name == "stays"
		}
		if !found {
			t.Fatalf("Queues lost the queue that stays: %+v", qs)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("churn: %v", err)
	}
	t.Logf("%d lists", lists)
}
