package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoSchedules means the queue's stream cannot keep message schedules, so jobs
// cannot be delayed or periodic on it: the server is older than 2.12, or the stream
// predates scheduling and the user may not update it.
var ErrNoSchedules = errors.New("queue cannot schedule jobs")

// allowSchedules makes the jobs stream of config cfg take message schedules on the
// schedule subjects (Names.ScheduleSubjects), and jobs on the priority levels'
// subjects (Names.PrioritySubjects), updating a stream created before workq
// scheduled jobs or had priorities, in one update, and sets *cfg to the config written. It returns nil when the stream takes them, else an error
// wrapping ErrNoSchedules that says why. Like allowAtomic, the update writes back
// the config as cfg read it, once per queue.
func allowSchedules(ctx context.Context, js jetstream.JetStream, n Names, cfg *jetstream.StreamConfig) error {
	missing := !cfg.AllowMsgSchedules
	for _, subj := range append(n.ScheduleSubjects(), n.PrioritySubjects()...) {
		if !slices.Contains(cfg.Subjects, subj) {
			cfg.Subjects = append(cfg.Subjects, subj)
			missing = true
		}
	}
	if !missing {
		return nil
	}
	cfg.AllowMsgSchedules = true
	s, err := js.UpdateStream(ctx, *cfg)
	if err != nil {
		return fmt.Errorf("%w: turning on message schedules on stream %s: %w", ErrNoSchedules, cfg.Name, err)
	}
	*cfg = s.CachedInfo().Config
	if !cfg.AllowMsgSchedules {
		return fmt.Errorf("%w: the server does not keep message schedules on stream %s (it needs nats-server 2.12 or later)", ErrNoSchedules, cfg.Name)
	}
	return nil
}
