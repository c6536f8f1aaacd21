package queue

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Census is what a queue's jobs stream holds, by kind of message: since delayed
// jobs and periodic schedules live in the stream beside the jobs, its message count
// and first message's time are not the queue's depth and oldest job.
type Census struct {
	Jobs      uint64    // job messages: queued, running or retrying
	Scheduled uint64    // delayed jobs waiting for their time
	Schedules uint64    // periodic schedules (paused ones too)
	Oldest    time.Time // when the oldest job message was stored; zero without jobs
}

// TakeCensus counts the messages of the jobs stream s, whose info is si, and ws the
// state of the workers' consumers. With a consumer for every level that has jobs, the
// jobs are their pending and unacknowledged messages and one request counts the
// schedules; otherwise the delayed jobs are counted by subject too (one entry per
// delayed job: costly for very many). Counts read apart may disagree by the jobs
// that moved meanwhile; none goes below zero.
func TakeCensus(ctx context.Context, s jetstream.Stream, n Names, si *jetstream.StreamInfo, ws WorkersState) (Census, error) {
	var c Census
	var err error
	if c.Schedules, err = countSubjects(ctx, s, n.PeriodicPrefix+">"); err != nil {
		return Census{}, err
	}
	msgs := si.State.Msgs
	if len(ws.Consumers) == len(Levels) {
		c.Jobs = min(msgs, ws.Pending+uint64(ws.AckPending))
		c.Scheduled = msgs - c.Jobs - min(msgs-c.Jobs, c.Schedules)
	} else {
		if c.Scheduled, err = countSubjects(ctx, s, n.DelayedPrefix+">"); err != nil {
			return Census{}, err
		}
		c.Jobs = msgs - min(msgs, c.Scheduled+c.Schedules)
	}
	switch {
	case c.Jobs == 0:
	case c.Scheduled == 0 && c.Schedules == 0:
		c.Oldest = si.State.FirstTime
	default:
		// The first message may be a schedule: find the first job on either jobs subject.
		for _, subject := range n.AllJobsFilter() {
			m, err := s.GetMsg(ctx, si.State.FirstSeq, jetstream.WithGetMsgSubject(subject))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				return Census{}, err
			}
			if c.Oldest.IsZero() || m.Time.Before(c.Oldest) {
				c.Oldest = m.Time
			}
		}
	}
	return c, nil
}

// countSubjects counts the messages of s on subjects matching filter.
func countSubjects(ctx context.Context, s jetstream.Stream, filter string) (uint64, error) {
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, k := range info.State.Subjects {
		n += k
	}
	return n, nil
}
