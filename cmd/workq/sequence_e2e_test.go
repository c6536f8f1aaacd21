package main_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
)

// `workq enqueue --sequence/--halt-on-dead` (and NDJSON "sequence"), `workq sequence
// ls | get | resume`: a key whose first job dies halts at the next one, is listed
// halted with the job that died, shows its jobs in order, and runs on after resume;
// a resume of a key not halted exits 1.
func TestSequenceCommands(t *testing.T) {
	t.Parallel()
	q := "seqcli-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	js := jsClient(t, serverURL)
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if string(j.Payload()) == "die" {
			return consumer.Permanent(errors.New("cannot do it"))
		}
		return nil
	}), consumer.Concurrency(4), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	defer func() { stop(); <-ran }()

	if out := ok(t, "", "enqueue", q, "die", "--id", "k-1", "--sequence", "cust 42"); !strings.HasPrefix(out, "enqueued k-1") {
		t.Fatalf("enqueue: %q", out)
	}
	ok(t, `{"id":"k-2","payload":"fine","sequence":"cust 42","halt_on_dead":true}`+"\n"+`{"id":"k-3","payload":"fine","sequence":"cust 42"}`+"\n",
		"enqueue", q, "--ndjson")
	if r := wq(t, "", "job", "wait", q, "k-1"); r.code != 1 || !regexp.MustCompile(`(?m)^state +dead$`).MatchString(r.stdout) {
		t.Fatalf("job wait k-1: exit %d, want 1 and the job dead:\n%s", r.code, r.stdout)
	}
	var out string
	deadline := time.Now().Add(20 * time.Second)
	for {
		out = ok(t, "", "sequence", "ls", q)
		if strings.Contains(out, "k-2") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !regexp.MustCompile(`(?m)^cust 42 +- +1 +\S.* +k-2 +k-1$`).MatchString(out) {
		t.Fatalf("sequence ls: want key cust 42 halted at k-2 after k-1, one waiting:\n%s", out)
	}
	out = ok(t, "", "sequence", "get", q, "cust 42")
	if !strings.Contains(out, "halted at k-2 (k-1 ended dead)") || !regexp.MustCompile(`(?s)k-2 +halted +0 +k-1 .*\nk-3 +waiting +0 +k-2 `).MatchString(out) {
		t.Fatalf("sequence get: want halted at k-2, then k-3 waiting for it:\n%s", out)
	}
	if out := ok(t, "", "job", "get", q, "k-3"); !regexp.MustCompile(`(?m)^sequence +cust 42$`).MatchString(out) || !strings.Contains(out, "k-2 (waiting for it to end)") {
		t.Fatalf("job get k-3: want its sequence and the job it waits for:\n%s", out)
	}
	// queue info counts k-3, waiting behind the halted k-2 (which waits for an
	// operator, not a job), once k-1's link to k-2 went.
	waitFor(t, 10*time.Second, "queue info to count k-3 waiting", func() bool {
		out := ok(t, "", "queue", "info", q)
		return regexp.MustCompile(`(?m)^waiting in sequences +1$`).MatchString(out) &&
			regexp.MustCompile(`(?m)^sequence keys with one waiting +1$`).MatchString(out) &&
			regexp.MustCompile(`(?m)^oldest waiting in a sequence +(just now|\d+s ago)$`).MatchString(out)
	})
	r := wq(t, "", "sequence", "resume", q, "other")
	oneLine(t, r, 1, "sequence other is not halted")
	if out := ok(t, "", "sequence", "resume", q, "cust 42"); !strings.HasPrefix(out, "cust 42: resumed at job k-2 (after k-1") {
		t.Fatalf("sequence resume: %q", out)
	}
	ok(t, "", "job", "wait", q, "k-3")
	if out := ok(t, "", "sequence", "ls", q); !strings.Contains(out, "no sequence in "+q) {
		t.Fatalf("sequence ls after the key ran on:\n%s", out)
	}
}
