package ui_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/kvlock"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
	"github.com/workq/workq/ui"
)

// hostile is a payload and an error text that would run script if a page did not
// escape them.
const (
	hostilePayload = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	hostileError   = `smtp 550 <script>window.pwned=3</script> mailbox unavailable`
)

// fixture is a server with queues holding jobs in every state, dead letters, a
// periodic schedule, held locks and a rate limiter: what the dashboard shows.
type fixture struct {
	js     jetstream.JetStream
	adm    *admin.Admin
	healed atomic.Bool // bounce jobs succeed from now on
}

// heal makes the bounce jobs succeed, so that a requeued one ends done.
func (f *fixture) heal() { f.healed.Store(true) }

// fill starts a server and fills it:
//
//	emails: done (welcome-1, welcome-2), running (slow-1), retrying (flaky-1), dead
//	        (bounce-1 with the hostile payload and error, bounce-2), scheduled
//	        (digest, in an hour), cancelled (cancel-me); schedule "nightly"; its
//	        worker runs until the test ends.
//	reports: 3 queued jobs (report-1..3), no worker.
//	locks: "invoice-run" held, one slot of semaphore "pdf-render", limiter
//	       "partner-api" (10 per minute) with 3 permits used.
func fill(t *testing.T) *fixture {
	t.Helper()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 60*time.Second)
	adm, err := admin.New(js)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{js: js, adm: adm}
	emails, err := producer.New(ctx, js, "emails")
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	quit := make(chan struct{}) // ends the slow job when the test does
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		switch {
		case strings.HasPrefix(j.ID(), "slow"):
			if err := j.Progress(ctx, 0.4, "page 4 of 10"); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-quit:
				return errors.New("test over")
			}
		case strings.HasPrefix(j.ID(), "bounce") && !f.healed.Load():
			return consumer.Permanent(errors.New(hostileError))
		case strings.HasPrefix(j.ID(), "flaky"):
			return errors.New("upstream timeout")
		}
		j.SetResult([]byte(`{"sent":true}`))
		return nil
	})
	w, err := consumer.New(ctx, js, "emails", h, consumer.Concurrency(4), consumer.Backoff(consumer.Constant(time.Hour)),
		consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { close(quit); stop(); <-done })
	for _, id := range []string{"welcome-1", "welcome-2", "slow-1", "flaky-1", "bounce-1", "bounce-2"} {
		payload := []byte(`{"to":"user@example.com","template":"` + id + `"}`)
		if id == "bounce-1" {
			payload = []byte(hostilePayload)
		}
		if _, err := emails.Enqueue(ctx, payload, producer.ID(id), producer.Kind("email")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := emails.Enqueue(ctx, []byte("weekly digest"), producer.ID("digest"), producer.Kind("digest"), producer.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := emails.Enqueue(ctx, []byte("never"), producer.ID("cancel-me"), producer.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := emails.Cancel(ctx, "cancel-me"); err != nil {
		t.Fatal(err)
	}
	if _, err := emails.Schedule(ctx, "nightly", "@daily", []byte("report"), producer.Kind("nightly-report")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "emails: 2 done, 1 running, 1 retrying, 2 dead", func() bool {
		qi, err := adm.Queue(ctx, "emails")
		if err != nil || qi.Dead != 2 || qi.Running != 1 || qi.Retrying != 1 {
			return false
		}
		for _, id := range []string{"welcome-1", "welcome-2"} {
			if r, err := adm.Job(ctx, "emails", id); err != nil || r.State != producer.StateDone {
				return false
			}
		}
		return true
	})

	reports, err := producer.New(ctx, js, "reports")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"report-1", "report-2", "report-3"} {
		if _, err := reports.Enqueue(ctx, []byte{0x00, 0x01, 0xfe, 0xff, 'p', 'd', 'f'}, producer.ID(id), producer.Kind("pdf")); err != nil {
			t.Fatal(err)
		}
	}

	l, err := kvlock.New(ctx, js, kvlock.Owner("billing-cron"))
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.Acquire(ctx, "invoice-run")
	if err != nil {
		t.Fatal(err)
	}
	sem, err := l.Semaphore("pdf-render", 2)
	if err != nil {
		t.Fatal(err)
	}
	slot, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = lk.Release(ctx)
		_ = slot.Release(ctx)
	})
	lim, err := l.Limiter(ctx, "partner-api", 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if ok, _, err := lim.Allow(ctx); err != nil || !ok {
			t.Fatalf("limiter: %v, %v", ok, err)
		}
	}
	return f
}

// serve serves the dashboard of f with opts on a test server.
func (f *fixture) serve(t *testing.T, opts ...ui.Option) *httptest.Server {
	t.Helper()
	h, err := ui.New(f.adm, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
