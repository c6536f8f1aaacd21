package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workq/workq/producer"
)

// A bulk enqueue interrupted by SIGINT says, per --json line, what it knows: a job
// enqueued, a job not enqueued (an error), or a job sent without an answer
// ("unknown": it may be enqueued). A line with an error and not unknown is never in
// the queue (issue 25: jobs in flight were reported failed with "context canceled",
// though the server had stored them, and a script resending them duplicated jobs).
func TestEnqueueInterruptedSaysWhatIsStored(t *testing.T) {
	t.Parallel()
	const q = "bulk-interrupt"
	p, stdin := startPipe(t, "enqueue", q, "--json")
	go func() {
		w := bufio.NewWriter(stdin)
		for i := range 200000 {
			if _, err := fmt.Fprintf(w, "%d\n", i); err != nil {
				return // workq exited
			}
		}
		_ = w.Flush()
		_ = stdin.Close()
	}()
	waitFor(t, 20*time.Second, "some jobs enqueued", func() bool { return strings.Count(p.stdout(), "\n") > 5000 })
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 30*time.Second); code == 0 {
		t.Fatalf("interrupted enqueue exited 0; stderr: %s", p.stderr())
	}
	if !strings.Contains(p.stderr(), "interrupted;") {
		t.Errorf("stderr %q does not say it was interrupted", p.stderr())
	}

	js := jsClient(t, serverURL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, err := producer.New(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	var enqueued, failed, unknown int
	for _, l := range strings.Split(strings.TrimSpace(p.stdout()), "\n") {
		var out struct {
			ID      string `json:"id"`
			Error   string `json:"error"`
			Unknown bool   `json:"unknown"`
		}
		if err := json.Unmarshal([]byte(l), &out); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		switch {
		case out.Error == "":
			enqueued++
		case out.Unknown:
			unknown++
		default:
			failed++
			if out.ID == "" {
				continue // never sent, so never given its generated id
			}
			if _, err := pr.Status(ctx, out.ID); !errors.Is(err, producer.ErrNotFound) {
				t.Errorf("job %s reported not enqueued (%s), but the queue has it: %v", out.ID, out.Error, err)
			}
		}
	}
	t.Logf("%d enqueued, %d not enqueued, %d unknown; stderr: %s", enqueued, failed, unknown, p.stderr())
	if enqueued == 0 {
		t.Fatal("nothing enqueued before the interrupt")
	}
}
