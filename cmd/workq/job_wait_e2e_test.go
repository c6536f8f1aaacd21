package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
)

// `workq enqueue --await` and `workq job wait` wait for a job's end and show its
// record; the exit status says whether it ended done (issue 26).
func TestAwaitJobEnd(t *testing.T) {
	t.Parallel()
	const q = "await"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := consumer.New(ctx, jsClient(t, serverURL), q, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		if string(j.Payload()) == "fail" {
			return consumer.Permanent(errors.New("cannot do it"))
		}
		time.Sleep(300 * time.Millisecond) // the enqueue returns before the end
		j.SetResult([]byte("did " + string(j.Payload())))
		return nil
	}), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	defer func() { stop(); <-ran }()

	var rec jobRecord
	okJSON(t, &rec, "enqueue", q, "it", "--id", "a1", "--await", "--json")
	if rec.ID != "a1" || rec.State != "done" || string(rec.Result) != "did it" {
		t.Errorf("enqueue --await: %+v, want a1 done with its result", rec)
	}
	r := wq(t, "", "enqueue", q, "fail", "--id", "a2", "--await")
	oneLine(t, r, 1, "job a2 ended dead")
	if !strings.Contains(r.stdout, "cannot do it") {
		t.Errorf("enqueue --await of a dead job printed %q, want its record with the error", r.stdout)
	}
	if out := ok(t, "", "job", "wait", q, "a1"); !strings.Contains(out, "did it") {
		t.Errorf("job wait for an ended job printed %q", out)
	}
	oneLine(t, wq(t, "", "job", "wait", q, "nobody"), 1, "not found")
	r = wq(t, "", "enqueue", q, "x", "--id", "a3", "--in", "1h", "--await", "--await-timeout", "500ms")
	oneLine(t, r, 1, "job a3 had not ended after 500ms")
	oneLine(t, wq(t, "one\ntwo\n", "enqueue", q, "--await"), 2, "--await waits for one job")

	// job wait returns when a worker ends the job, not before.
	ok(t, "", "enqueue", q, "later", "--id", "a4")
	r = wq(t, "", "job", "wait", q, "a4", "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rec) != nil || rec.State != "done" {
		t.Errorf("job wait a4: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
}
