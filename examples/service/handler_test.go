package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/consumertest"
)

// fakeMailer records what it was asked to send and fails while err is set.
type fakeMailer struct {
	mu   sync.Mutex
	err  error
	sent []string // idempotency keys
}

func (f *fakeMailer) Send(_ context.Context, key string, _ SendEmail) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.sent = append(f.sent, key)
	return nil
}

func (f *fakeMailer) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent...)
}

// testMux is the service's Mux with m as its mailer.
func testMux(t *testing.T, m Mailer) *consumer.Mux {
	t.Helper()
	mux, err := newMux(m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return mux
}

// A mail sent commits the job with its result, and the mailer gets the job id as
// its idempotency key.
func TestSendEmailCommits(t *testing.T) {
	t.Parallel()
	m := &fakeMailer{}
	res := consumertest.WorkArgs(t, testMux(t, m), SendEmail{To: "ada@example.com", Subject: "Hi"},
		consumertest.ID("welcome-ada"), consumertest.WorkerOptions(retries()...))
	if res.Outcome != consumertest.Committed {
		t.Fatalf("outcome %s (%v), want committed", res.Outcome, res.Err)
	}
	if got := string(res.Record.Result); got != "sent to ada@example.com" {
		t.Errorf("result %q", got)
	}
	if keys := m.keys(); len(keys) != 1 || keys[0] != "welcome-ada" {
		t.Errorf("mailer keys %q, want [welcome-ada]", keys)
	}
}

// A mailer that fails puts the job back to retry after the backoff.
func TestSendEmailRetriesWhenTheMailerFails(t *testing.T) {
	t.Parallel()
	errDown := errors.New("mail provider unavailable")
	res := consumertest.WorkArgs(t, testMux(t, &fakeMailer{err: errDown}), SendEmail{To: "ada@example.com"},
		consumertest.WorkerOptions(retries()...))
	if res.Outcome != consumertest.Retrying || !errors.Is(res.Err, errDown) {
		t.Fatalf("outcome %s (%v), want retrying with %v", res.Outcome, res.Err, errDown)
	}
	if res.Delay <= 0 || res.Delay > time.Minute {
		t.Errorf("retry delay %s, want within the backoff's (0, 1m]", res.Delay)
	}
}

// The fifth failure is the last: the job goes to dead letters.
func TestSendEmailLastAttemptIsDead(t *testing.T) {
	t.Parallel()
	errDown := errors.New("mail provider unavailable")
	res := consumertest.WorkArgs(t, testMux(t, &fakeMailer{err: errDown}), SendEmail{To: "ada@example.com"},
		consumertest.Attempt(5), consumertest.WorkerOptions(retries()...))
	if res.Outcome != consumertest.Dead || !errors.Is(res.Err, errDown) {
		t.Fatalf("outcome %s (%v), want dead with %v", res.Outcome, res.Err, errDown)
	}
}

// A bad address goes to dead letters on its first attempt, without a send.
func TestBadAddressIsDeadAtOnce(t *testing.T) {
	t.Parallel()
	m := &fakeMailer{}
	res := consumertest.WorkArgs(t, testMux(t, m), SendEmail{To: "nobody"}, consumertest.WorkerOptions(retries()...))
	if res.Outcome != consumertest.Dead || !errors.Is(res.Err, errBadAddress) || res.Attempt != 1 {
		t.Fatalf("outcome %s on attempt %d (%v), want dead on attempt 1 with %v", res.Outcome, res.Attempt, res.Err, errBadAddress)
	}
	if keys := m.keys(); len(keys) != 0 {
		t.Errorf("mailer sent %q", keys)
	}
}
