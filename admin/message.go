package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/retry"
)

// JobMessage is a job's message as the queue's stream holds it while the job waits,
// runs or retries: what a worker is handed.
type JobMessage struct {
	Sequence uint64      `json:"sequence"`
	Subject  string      `json:"subject"`
	Time     time.Time   `json:"time"` // when the server stored it
	Header   nats.Header `json:"headers,omitempty"`
	Payload  []byte      `json:"payload,omitempty"` // base64 in JSON
}

// JobMessage returns the message of job id on queue name, with its headers and
// payload, while the queue's stream holds it: the job is scheduled, queued, running
// or retrying. A finished job's message is gone (the stream removes a job once it is
// acknowledged; a dead job's payload is in its dead letter): ErrNotFound, as for an
// unknown id.
func (a *Admin) JobMessage(ctx context.Context, name, id string) (*JobMessage, error) {
	n, err := names(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := queue.CheckID(id); err != nil {
		return nil, fmt.Errorf("admin: queue %s: %w", n.Queue, err)
	}
	s, err := a.jobsStream(ctx, n)
	if err != nil {
		return nil, err
	}
	for _, subject := range n.JobSubjects(id) {
		var m *jetstream.RawStreamMsg
		err := retry.Do(ctx, func(ctx context.Context) error {
			var err error
			m, err = s.GetLastMsgForSubject(ctx, subject)
			return err
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("queue %s: job %s: read its message: %w", n.Queue, id, err)
		}
		return &JobMessage{Sequence: m.Sequence, Subject: m.Subject, Time: m.Time, Header: m.Header, Payload: m.Data}, nil
	}
	return nil, fmt.Errorf("queue %s: job %s has no message in the stream (finished, or unknown): %w", n.Queue, id, ErrNotFound)
}
