package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/workq/workq/consumertest"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// errCrash stands for the relay dying between an enqueue and its mark.
var errCrash = errors.New("relay died before marking the row sent")

// crashBeforeMark is a Store whose MarkSent fails, as if the relay died right after
// the enqueue.
type crashBeforeMark struct{ Store }

func (crashBeforeMark) MarkSent(context.Context, string) error { return errCrash }

// A relay that dies after enqueuing a row and before marking it sent leaves the row
// pending; the next relay enqueues it again under the same id, and the queue holds
// the job once.
func TestRelayCrashBeforeMarkEnqueuesTheJobOnce(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	const queue = "outbox"
	p, err := producer.New(ctx, js, queue)
	if err != nil {
		t.Fatal(err)
	}
	store := &MemStore{}
	store.Add(
		Row{ID: "welcome-ada", Kind: "send_email", Payload: []byte(`{"to":"ada@example.com"}`)},
		Row{ID: "welcome-bob", Kind: "send_email", Payload: []byte(`{"to":"bob@example.com"}`)},
	)

	// The first relay enqueues welcome-ada and dies before it marks the row.
	n, err := (&Relay{Store: crashBeforeMark{store}, Producer: p}).Once(ctx)
	if !errors.Is(err, errCrash) || n != 0 {
		t.Fatalf("crashing relay: sent %d, err %v; want 0 and %v", n, err, errCrash)
	}
	if got := consumertest.Enqueued(t, js, queue); len(got) != 1 {
		t.Fatalf("after the crash the queue holds %d jobs (%q), want 1", len(got), ids(got))
	}

	// The relay that replaces it finds both rows pending and relays them.
	n, err = (&Relay{Store: store, Producer: p}).Once(ctx)
	if err != nil || n != 2 {
		t.Fatalf("second relay: sent %d, err %v; want 2, nil", n, err)
	}
	got := consumertest.Enqueued(t, js, queue)
	if len(got) != 2 {
		t.Fatalf("the queue holds %d jobs (%q), want 2: each row's job once", len(got), ids(got))
	}
	if !slices.Equal(ids(got), []string{"welcome-ada", "welcome-bob"}) {
		t.Fatalf("the queue holds %q, want the rows' ids [welcome-ada welcome-bob]", ids(got))
	}
	if rows, _ := store.Pending(ctx, 10); len(rows) != 0 {
		t.Fatalf("rows still pending: %v", rows)
	}
}

// ids lists the jobs' ids in stream order.
func ids(jobs []consumertest.EnqueuedJob) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// Run relays batch after batch while rows wait, picks up rows added later, and
// returns when its context ends.
func TestRelayRun(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	const queue = "outbox-run"
	p, err := producer.New(ctx, js, queue)
	if err != nil {
		t.Fatal(err)
	}
	store := &MemStore{}
	for i := range 250 {
		store.Add(Row{ID: fmt.Sprintf("row-%d", i), Payload: []byte("x")})
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- (&Relay{Store: store, Producer: p, Batch: 100}).Run(runCtx, 50*time.Millisecond) }()

	pending := func() int { rows, _ := store.Pending(ctx, 1000); return len(rows) }
	testenv.Eventually(t, 10*time.Second, "250 rows relayed", func() bool { return pending() == 0 })
	store.Add(Row{ID: "late", Payload: []byte("y")})
	testenv.Eventually(t, 10*time.Second, "a row added later relayed", func() bool { return pending() == 0 })
	if n := len(consumertest.Enqueued(t, js, queue)); n != 251 {
		t.Errorf("the queue holds %d jobs, want 251", n)
	}
	stop()
	select {
	case err := <-ran:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s after its context ended")
	}
}
