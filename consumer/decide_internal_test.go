package consumer

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Every row of decide: a lost claim wins over whatever the handler returned, nil
// commits, the drain timeout hands back, Permanent and the last attempt dead-letter,
// RetryAfter's delay beats the backoff's.
func TestDecide(t *testing.T) {
	boom := errors.New("boom")
	backoff := func(attempt int) time.Duration { return time.Duration(attempt) * time.Second }
	stale := fmt.Errorf("claimed again: %w", ErrStale)
	for _, c := range []struct {
		name        string
		herr, cause error
		attempt     int
		want        outcome
		delay       time.Duration
		reason      error // errors.Is the decision's reason
	}{
		{name: "success", attempt: 1, want: commitIt},
		{name: "success after the claim was lost", cause: stale, attempt: 1, want: lostIt, reason: ErrStale},
		{name: "failure after a cancel", herr: boom, cause: fmt.Errorf("x: %w (%w)", ErrCancelled, ErrStale), attempt: 1, want: lostIt, reason: ErrCancelled},
		{name: "failure", herr: boom, attempt: 2, want: retryIt, delay: 2 * time.Second, reason: boom},
		{name: "failure asking for a delay", herr: RetryAfter(time.Minute, boom), attempt: 2, want: retryIt, delay: time.Minute, reason: boom},
		{name: "failure on the last attempt", herr: boom, attempt: 3, want: deadLetterIt, reason: ErrExhausted},
		{name: "failure past the last attempt", herr: boom, attempt: 4, want: deadLetterIt, reason: ErrExhausted},
		{name: "permanent failure", herr: Permanent(boom), attempt: 1, want: deadLetterIt, reason: boom},
		{name: "cut short by the drain timeout", herr: errors.New("context canceled"), cause: errDrained, attempt: 1, want: giveItBack},
		{name: "success despite the drain timeout", cause: errDrained, attempt: 1, want: commitIt},
		{name: "failure after a timeout", herr: boom, cause: errors.New("job x: timeout 1s passed"), attempt: 1, want: retryIt, delay: time.Second, reason: boom},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := decide(c.herr, c.cause, c.attempt, 3, backoff)
			if d.outcome != c.want || d.delay != c.delay || c.reason != nil && !errors.Is(d.reason, c.reason) {
				t.Fatalf("decide = %s, delay %s, reason %v; want %s, delay %s, reason %v", d.outcome, d.delay, d.reason, c.want, c.delay, c.reason)
			}
		})
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[outcome]string{commitIt: "commit", retryIt: "retry", deadLetterIt: "dead letter", giveItBack: "give back", lostIt: "lost", outcome(42): "outcome(?)"} {
		if got := o.String(); got != want {
			t.Errorf("outcome(%d).String() = %q, want %q", int(o), got, want)
		}
	}
}
