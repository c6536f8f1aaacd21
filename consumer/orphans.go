package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/record"
)

// A single nats-server killed and restarted on its store can come back with a
// WorkQueue stream that still holds a message its consumer acked before the crash:
// the consumer's ack floor survived, the removal its ack made in the stream did not
// (seen with nats-server v2.15.2, sync always: a done job's message kept below an ack
// floor far past it, nothing pending). The consumer never delivers such a message
// again, so it would stay in the stream for good, counted by queue info and the
// dashboard as a job that never leaves.
//
// So at start, each time pulls work again after failing, and every AckWait (at least
// a second) while it runs, a worker sweeps each level's consumer: continually,
// because such a message can sit above the ack floor when the crash leaves it (lower
// messages still pending) and fall below it only later. Every message of the level at
// or below the consumer's ack floor (acked, as far as the server knows) whose job's
// record has ended — done, dead or cancelled — is deleted. One whose record has not
// ended is left, and logged once: it will not be delivered again, and only an
// operator can tell whether to run it (the record and the message are both kept for
// that).

// sweepLimit bounds the messages one sweep reads; the next sweep goes on.
const sweepLimit = 10000

// sweepOrphans removes the finished jobs' messages left below the ack floor of s's
// consumer.
func (w *Worker) sweepOrphans(ctx context.Context, s *source) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ci, err := s.consumer.Info(ctx)
	if err != nil {
		return
	}
	floor := ci.AckFloor.Stream
	// A handle of its own: Info on the worker's would change the stream info it has
	// cached since it started, which other code reads (the stream's replicas).
	stream, err := w.js.Stream(ctx, w.names.Stream)
	if err != nil {
		return
	}
	si := stream.CachedInfo()
	if floor == 0 || si.State.Msgs == 0 || si.State.FirstSeq > floor {
		return // the usual case: nothing in the stream is below the floor
	}
	removed, stuck := 0, []string{}
	// Only this level's subjects are read, so the cost is the orphans found (the
	// level's messages at or below the floor are all acked), not the delayed jobs and
	// other levels' backlog that may sit below it.
	for _, subject := range w.names.LevelFilter(s.level) {
		for seq, n := si.State.FirstSeq, 0; seq <= floor && n < sweepLimit; n++ {
			m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject)) // the next one from seq on
			if err != nil || m.Sequence > floor {
				break
			}
			seq = m.Sequence + 1
			id := w.names.MessageJobID(m.Subject, m.Header, m.Sequence)
			rec, err := w.records.Get(ctx, id)
			switch {
			case err == nil && rec.State.Terminal():
				if err := stream.DeleteMsg(ctx, m.Sequence); err == nil || errors.Is(err, jetstream.ErrMsgNotFound) {
					removed++
				}
			case (err == nil || errors.Is(err, record.ErrNotFound)) && !s.stuck[m.Sequence]:
				if s.stuck == nil {
					s.stuck = map[uint64]bool{}
				}
				s.stuck[m.Sequence] = true
				stuck = append(stuck, id)
			}
		}
	}
	if removed > 0 {
		w.log.Info("removed the messages of finished jobs that the server kept below its consumer's ack floor (a crash lost their removal)",
			"consumer", w.names.LevelConsumer(s.level), "removed", removed, "ack_floor", floor)
	}
	if len(stuck) > 0 {
		w.log.Warn("jobs whose messages the server keeps below its consumer's ack floor, though their records have not ended: "+
			"it will not deliver them again (a crash lost their state); check them, and enqueue them again if they are to run",
			"consumer", w.names.LevelConsumer(s.level), "jobs", stuck[:min(len(stuck), 20)], "count", len(stuck), "ack_floor", floor)
	}
}
