package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/retry"
)

// pausedFor is how far ahead PauseQueue pauses: for good, as far as the server's
// durations reach (a time.Duration holds 292 years).
const pausedFor = 100 * 365 * 24 * time.Hour

// resumeIn is the short pause that Resume ends a pause with. The server's own resume
// call leaves the workers' waiting pull requests unserved until a new job or a new
// request comes; a pause that expires wakes them at once.
const resumeIn = 10 * time.Millisecond

// PauseQueue pauses the queue on the server: its workers get no jobs until
// ResumeQueue, wherever they run, and stay connected and idle (their pull requests
// wait). Jobs running as it pauses go on and commit; enqueues still work, and delayed
// and periodic jobs fire into the queue and wait there. The pause is kept in the
// workers' consumer on the server, so it holds across worker restarts, server
// restarts and failovers. Pausing a paused queue changes nothing. A queue on which no
// worker has run yet has no consumer to pause: ErrNoWorkers.
func (a *Admin) PauseQueue(ctx context.Context, name string) error {
	return a.setPause(ctx, name, "pause", time.Now().Add(pausedFor))
}

// ResumeQueue ends a pause: waiting workers get jobs at once. Resuming a queue that
// is not paused changes nothing.
func (a *Admin) ResumeQueue(ctx context.Context, name string) error {
	return a.setPause(ctx, name, "resume", time.Now().Add(resumeIn))
}

// setPause pauses every workers' consumer of the queue until the time given.
func (a *Admin) setPause(ctx context.Context, name, what string, until time.Time) error {
	n, err := names(ctx, name)
	if err != nil {
		return err
	}
	s, err := a.jobsStream(ctx, n)
	if err != nil {
		return err
	}
	var ws queue.WorkersState
	err = retry.Do(ctx, func(ctx context.Context) error {
		ws, err = queue.ReadWorkers(ctx, s, n)
		return err
	})
	consumers := ws.Consumers
	if err != nil {
		return fmt.Errorf("%s queue %s: %w", what, n.Queue, err)
	}
	if len(consumers) == 0 {
		return fmt.Errorf("%s queue %s: it has %w (no worker has run yet)", what, n.Queue, ErrNoWorkers)
	}
	for _, c := range consumers {
		if what == "resume" && !c.Paused {
			continue // a short pause would hold it up for nothing
		}
		err := retry.Do(ctx, func(ctx context.Context) error {
			_, err := a.js.PauseConsumer(ctx, n.Stream, c.Name, until)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s queue %s (consumer %s): %w", what, n.Queue, c.Name, err)
		}
	}
	return nil
}
