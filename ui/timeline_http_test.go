package ui_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// retryBackoff is how long a failed attempt of runOnWorkers waits: long enough to
// stop its worker before the job comes due again, on a loaded machine too.
const retryBackoff = 3 * time.Second

// attemptTook is how long each attempt of runOnWorkers runs: its bar shows.
const attemptTook = 300 * time.Millisecond

// runOnWorkers enqueues job id on queue and runs its attempts on one worker each,
// named by workers, one after the other: each attempt takes attemptTook, then each
// worker but the last fails it with "<worker> failed", the last commits it. It
// returns when the job is done.
func runOnWorkers(t *testing.T, js jetstream.JetStream, adm *admin.Admin, queue, id string, workers ...string) {
	t.Helper()
	ctx := testenv.Context(t, 90*time.Second)
	p, err := producer.New(ctx, js, queue)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("x"), producer.ID(id)); err != nil {
		t.Fatal(err)
	}
	for i, name := range workers {
		last := i == len(workers)-1
		h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
			select {
			case <-time.After(attemptTook):
			case <-ctx.Done():
				return ctx.Err()
			}
			if last {
				return nil
			}
			return errors.New(name + " failed")
		})
		w, err := consumer.New(ctx, js, queue, h, consumer.Name(name), consumer.Backoff(consumer.Constant(retryBackoff)),
			consumer.Logger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		want, state := i+1, producer.StateRetrying
		if last {
			state = producer.StateDone
		}
		testenv.Eventually(t, 30*time.Second, name+" to end attempt "+strconv.Itoa(want), func() bool {
			r, err := adm.Job(ctx, queue, id)
			return err == nil && r.Attempt == want && r.State == state
		})
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("worker %s: %v", name, err)
		}
	}
}

// A job that failed twice, on two workers, then was committed on a third: its
// page shows the three attempts in order on one time axis, each with its worker,
// outcome and error, its bar after the one before.
func TestJobTimelineShowsEachAttempt(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	adm, srv := serveJS(t, js)
	runOnWorkers(t, js, adm, "mail", "flaky-1", "worker-a", "worker-b", "worker-c")

	_, page, _ := get(t, browser(t), srv.URL+"/queues/mail/jobs/flaky-1")
	rows := regexp.MustCompile(`(?s)<tr data-attempt="(\d+)" data-outcome="([a-z]+)">(.*?)</tr>`).FindAllStringSubmatch(page, -1)
	want := []struct{ n, outcome, worker, err string }{
		{"1", "failed", "worker-a", "worker-a failed"},
		{"2", "failed", "worker-b", "worker-b failed"},
		{"3", "done", "worker-c", ""},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d attempts shown; want 3:\n%s", len(rows), page)
	}
	field := func(row, name string) string {
		m := regexp.MustCompile(`(?s)data-field="` + name + `"[^>]*>(.*?)</td>`).FindStringSubmatch(row)
		if m == nil {
			return "<none>"
		}
		return strings.TrimSpace(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], ""))
	}
	bar := regexp.MustCompile(`data-x="([\d.]+)" data-w="([\d.]+)"`)
	prevEnd := -1.0
	for i, w := range want {
		row := rows[i]
		if row[1] != w.n || row[2] != w.outcome || field(row[3], "worker") != w.worker || field(row[3], "error") != w.err {
			t.Errorf("attempt row %d: attempt %s, %s, worker %q, error %q; want attempt %s, %s on %s, error %q",
				i, row[1], row[2], field(row[3], "worker"), field(row[3], "error"), w.n, w.outcome, w.worker, w.err)
		}
		took, err := time.ParseDuration(field(row[3], "took"))
		if !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(field(row[3], "started")) || err != nil || took < attemptTook {
			t.Errorf("attempt %s: started %q, took %q; want its start and its duration (%s at least)", w.n, field(row[3], "started"), field(row[3], "took"), attemptTook)
		}
		m := bar.FindStringSubmatch(row[3])
		if m == nil {
			t.Fatalf("attempt %s has no bar", w.n)
		}
		x, width := parseFloat(t, m[1]), parseFloat(t, m[2])
		// The bars stand in order: each starts after the one before ended (the
		// backoff between them is most of the axis).
		if x < prevEnd || x+width > 1000.01 {
			t.Errorf("attempt %s's bar at %v+%v; want after %v and within 1000", w.n, x, width, prevEnd)
		}
		prevEnd = x + width
	}
	if !strings.Contains(page, `<span class="state done">done</span>`) {
		t.Error("the job is not shown done")
	}
}

func parseFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
