package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/workq/workq/consumer"
)

// queueName is the queue the service's producer and worker share.
const queueName = "emails"

// SendEmail is a job: send one e-mail. The type names its kind once, for the
// producer (EnqueueArgs) and the worker (RouteArgs) alike, so the two cannot
// disagree on a string.
type SendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// Kind names SendEmail jobs.
func (SendEmail) Kind() string { return "send_email" }

// Digest is the periodic job: the server fires one at every time of its
// schedule.
type Digest struct{}

// Kind names Digest jobs.
func (Digest) Kind() string { return "digest" }

// Mailer sends e-mail. key is the same on every run of one job (the job id), so a
// mail provider that takes an idempotency key sends the mail once even when the
// job runs twice: delivery is at least once.
type Mailer interface {
	Send(ctx context.Context, key string, m SendEmail) error
}

// errBadAddress is a failure no retry can fix.
var errBadAddress = errors.New("not an e-mail address")

// retries is the service's retry policy: five runs, then dead letters, with an
// exponential backoff between them from 1s up to a minute.
func retries() []consumer.Option {
	return []consumer.Option{
		consumer.MaxAttempts(5),
		consumer.Backoff(consumer.Exponential(time.Second, time.Minute)),
	}
}

// newMux routes each job kind to its handler.
func newMux(m Mailer, log *slog.Logger) (*consumer.Mux, error) {
	mux := consumer.NewMux()
	if err := consumer.RouteArgs(mux, sendEmail(m)); err != nil {
		return nil, err
	}
	if err := consumer.RouteArgs(mux, digest(log)); err != nil {
		return nil, err
	}
	return mux, nil
}

// sendEmail is the SendEmail handler. A nil error commits the job; an error is
// retried after the worker's backoff until its attempts run out; a Permanent error
// sends the job to dead letters at once.
func sendEmail(m Mailer) func(ctx context.Context, j *consumer.Job, e SendEmail) error {
	return func(ctx context.Context, j *consumer.Job, e SendEmail) error {
		if !strings.Contains(e.To, "@") {
			return consumer.Permanent(fmt.Errorf("%q: %w", e.To, errBadAddress))
		}
		if err := m.Send(ctx, j.ID(), e); err != nil {
			return fmt.Errorf("send to %s: %w", e.To, err)
		}
		j.SetResult([]byte("sent to " + e.To))
		return nil
	}
}

// digest is the Digest handler: each firing is one job, named after the
// schedule and the time it stands for.
func digest(log *slog.Logger) func(ctx context.Context, j *consumer.Job, _ Digest) error {
	return func(ctx context.Context, j *consumer.Job, _ Digest) error {
		log.Info("digest", "schedule", j.Schedule(), "for", j.ScheduledAt().Format(time.RFC3339))
		j.SetResult([]byte("digest for " + j.ScheduledAt().UTC().Format(time.RFC3339)))
		return nil
	}
}

// logMailer is the Mailer of this example: it logs the mail instead of sending it.
type logMailer struct{ log *slog.Logger }

func (l logMailer) Send(_ context.Context, key string, m SendEmail) error {
	l.log.Info("mail sent", "key", key, "to", m.To, "subject", m.Subject)
	return nil
}
