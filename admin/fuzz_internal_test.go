package admin

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/queue"
)

// A dead letter's headers may come from any client publishing to the dead-letter
// subject: they read as a DeadLetter whatever they hold, never a panic, and the
// selection of requeue matches it without one either.
func FuzzDeadLetterHeaders(f *testing.F) {
	f.Add("job-1", "k", "boom", "workq.q.jobs.job-1", "3", "17", "2026-11-24T02:00:00Z")
	f.Add("", "", "", "", "-1", "x", "garbage")
	f.Add("a b", "k\n", "\x00", "workq.q.prio.9.x", "99999999999999999999", "18446744073709551616", "2026-13-40T99:00:00Z")
	at := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, id, kind, errText, subject, attempts, origSeq, deadAt string) {
		h := nats.Header{}
		for k, v := range map[string]string{
			queue.HeaderDeadID: id, queue.HeaderKind: kind, queue.HeaderDeadError: errText, queue.HeaderDeadSubject: subject,
			queue.HeaderDeadAttempts: attempts, queue.HeaderDeadSequence: origSeq, queue.HeaderDeadAt: deadAt,
		} {
			h.Set(k, v)
		}
		d := deadLetterOf(5, at, h, []byte("p"), true)
		if d.Sequence != 5 || d.Size != 1 || d.DeadAt.IsZero() {
			t.Fatalf("dead letter %+v", d)
		}
		Selection{IDs: []string{id}, Sequences: []uint64{5}}.match(d)
	})
}
