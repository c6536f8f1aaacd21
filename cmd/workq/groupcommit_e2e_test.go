package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// --group-commit takes on, off or auto on every command that has it; a bad word is
// one usage line. With on, `workq enqueue` stores a file of jobs by atomic batches
// (the stored messages carry the batch's headers), and `workq work --group-commit on`
// runs them all to done.
func TestGroupCommitFlag(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{{"enqueue", "gcq", "x"}, {"work", "gcq"}, {"bench"}} {
		r := wq(t, "", append(cmd, "--group-commit", "sometimes", "--", "true")...)
		oneLine(t, r, 2, "--group-commit", "on, off or auto")
	}

	const q, n = "gcflag", 200
	ok(t, strings.Repeat("job\n", n), "enqueue", q, "--group-commit", "on")
	nc, err := nats.Connect(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "WORKQ_"+q)
	if err != nil {
		t.Fatal(err)
	}
	batched := 0
	for seq := uint64(1); seq <= n; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("Nats-Batch-Id") != "" {
			batched++
		}
	}
	if batched == 0 {
		t.Fatalf("none of %d jobs enqueued with --group-commit on was stored by an atomic batch", n)
	}
	w := start(t, "work", q, "--group-commit", "on", "--concurrency", "16", "--", "true")
	waitFor(t, 60*time.Second, "every job done and acked", func() bool { return getQueue(t, q).Jobs == 0 })
	w.stop(t)
	t.Logf("%d of %d jobs stored by atomic batches", batched, n)
}
