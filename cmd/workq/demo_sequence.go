package main

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
)

// The demo's sequences: the webhooks of two customers, enqueued interleaved, each
// customer's delivered one at a time in order while the two run side by side.

// demoSequenceKeys are the demo's sequence keys.
var demoSequenceKeys = []string{"customer-a", "customer-b"}

// demoSequencePerKey is how many jobs each key gets.
const demoSequencePerKey = 3

// demoSequenceJobs is how many jobs the sequences add to the demo's count.
var demoSequenceJobs = len(demoSequenceKeys) * demoSequencePerKey

// demoSequenceID is the id of key's nth job.
func demoSequenceID(key string, n int) string { return fmt.Sprintf("hook-%s-%d", key, n) }

// enqueueSequences enqueues the keys' jobs interleaved: a1, b1, a2, b2, …, at high
// priority so that they do not wait behind the backlog, once the faulty workers hold
// their jobs (after enqueueUrgent), so that the demo's well-behaved workers run them.
func (d *demo) enqueueSequences(ctx context.Context, p *producer.Producer) error {
	for n := 1; n <= demoSequencePerKey; n++ {
		for _, key := range demoSequenceKeys {
			_, err := p.Enqueue(ctx, fmt.Appendf(nil, `{"event":%d}`, n), producer.ID(demoSequenceID(key, n)), producer.Kind("seq-hook"),
				producer.Sequence(key), producer.Priority(producer.PriorityHigh))
			if err != nil {
				return err
			}
		}
	}
	d.out.event("⇶", "sequences %s and %s: %d webhooks each, enqueued interleaved; each key runs one at a time, in order",
		demoSequenceKeys[0], demoSequenceKeys[1], demoSequencePerKey)
	return nil
}

// sequenceJob runs a job of the demo's sequences; it reports false for any other job.
func (d *demo) sequenceJob(ctx context.Context, j *consumer.Job, worker string) bool {
	if j.Kind() != "seq-hook" {
		return false
	}
	d.out.event("⇶", "%s started on %s", j.ID(), worker)
	select {
	case <-time.After(30 * time.Millisecond): // a webhook call
	case <-ctx.Done():
	}
	return true
}

// sequenceProblems checks, from the records, that every job of each key ran once and
// after the one before it ended; it returns what did not hold.
func (d *demo) sequenceProblems(ctx context.Context, p *producer.Producer) []string {
	var problems []string
	for _, key := range demoSequenceKeys {
		var prev *producer.Record
		for n := 1; n <= demoSequencePerKey; n++ {
			id := demoSequenceID(key, n)
			rec, err := p.Status(ctx, id)
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s: %v", id, err))
				continue
			case rec.State != producer.StateDone || rec.SequenceKey != key:
				problems = append(problems, fmt.Sprintf("%s is %s in sequence %q, want done in %s", id, rec.State, rec.SequenceKey, key))
			case prev != nil && !rec.StartedAt.After(prev.FinishedAt):
				problems = append(problems, fmt.Sprintf("%s started before %s ended", id, prev.ID))
			}
			prev = rec
		}
	}
	return problems
}
