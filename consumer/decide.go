package consumer

import (
	"errors"
	"fmt"
	"time"
)

// outcome is how a run ends, decided from the handler's result alone (decide); the
// worker then settles it (settle.go).
type outcome int

const (
	commitIt     outcome = iota // the handler succeeded: commit its result
	retryIt                     // it failed with attempts left: record the failure, run again after the delay
	deadLetterIt                // it failed for good (Permanent, or on its last attempt): dead letter
	giveItBack                  // the worker stopped and its drain timeout cut the run short: hand the job back, its attempt not counted
	lostIt                      // the run's claim was taken (another run, a cancel): write nothing, leave the job
)

var outcomeNames = [...]string{"commit", "retry", "dead letter", "give back", "lost"}

func (o outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(?)"
}

// decision is an outcome with what settling it takes.
type decision struct {
	outcome outcome
	delay   time.Duration // retryIt: until the next attempt
	reason  error         // retryIt: the handler's error; deadLetterIt: why the job dies; lostIt: the cause (ErrStale, ErrCancelled)
}

// decide decides how a run ends from the handler's error, the cause its context
// ended with (nil if it did not end), the run's attempt, the attempts allowed and the
// backoff. Fenced and unfenced runs decide alike; only their settling differs.
//
//   - A run whose context ended with ErrStale (ErrCancelled matches it) lost its claim:
//     whatever the handler returned, nothing of it may be written.
//   - A nil error commits.
//   - An error after the drain timeout cut the run short hands the job back.
//   - A Permanent error, or any error on the last attempt, dead-letters the job.
//   - Any other error retries it after RetryAfter's delay, or the backoff's.
func decide(herr, cause error, attempt, maxAttempts int, backoff BackoffFunc) decision {
	switch {
	case errors.Is(cause, ErrStale):
		return decision{outcome: lostIt, reason: cause}
	case herr == nil:
		return decision{outcome: commitIt}
	case errors.Is(cause, errDrained):
		return decision{outcome: giveItBack}
	case IsPermanent(herr):
		return decision{outcome: deadLetterIt, reason: herr}
	case attempt >= maxAttempts:
		return decision{outcome: deadLetterIt, reason: fmt.Errorf("%w (%d of %d): %w", ErrExhausted, attempt, maxAttempts, herr)}
	}
	delay, ok := retryDelay(herr)
	if !ok {
		delay = backoff(attempt)
	}
	return decision{outcome: retryIt, delay: delay, reason: herr}
}
