package workflow

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/retry"
)

// An enqueue of a sequence's job or of a workflow writes records first and publishes
// the messages of the jobs that may start after: a producer that dies in between
// leaves a job queued in its record whose message is not in the queue, or one waiting
// for a job that ended before the link to it was written. What such an enqueue left
// is finished by the next enqueue of the key, a retry of the enqueue, or the sweep
// (sweep.go), all through FinishEnqueue.

// FinishEnqueue finishes what an enqueue of rec, a job not claimed yet, may have left
// undone, and reports whether anything was. A queued job's message may not have been
// published: it is, unless the queue holds it (publishing it again would be the same
// job, but a copy). When it was released by the job before it (After), that job's end
// may not have dropped its successor link either (the release's publish failed, say):
// that end is finished first. A job waiting for a job that ended is told.
func (r *Releaser) FinishEnqueue(ctx context.Context, rec *record.Record) (bool, error) {
	switch {
	case rec.State == record.Queued && rec.After != "":
		if err := r.TellIfEnded(ctx, rec.SequenceKey, rec.ID, rec.After); err != nil {
			return false, err
		}
		return r.publishMissing(ctx, rec) // a resumed job's release has no link to finish
	case rec.State == record.Queued:
		return r.publishMissing(ctx, rec)
	case rec.State == record.Waiting && rec.After != "" && len(rec.WaitingFor) > 0:
		cur, err := r.Store.Get(ctx, rec.After)
		if err == nil && !cur.State.Terminal() {
			return false, nil // the job before it has not ended: it waits, as it should
		}
		return true, r.TellIfEnded(ctx, rec.SequenceKey, rec.ID, rec.After)
	}
	return false, nil
}

// TellIfEnded tells job id, which waits for job pred in sequence key, that pred
// ended, if it has (as a sequence's job ends: SequenceEnded). It finishes pred's end
// as pred's own end does (Ended): that end ran before id's link was written, found no
// successor, and left the link for id's enqueue to tell and drop.
func (r *Releaser) TellIfEnded(ctx context.Context, key, id, pred string) error {
	cur, err := r.Store.Get(ctx, pred)
	switch {
	case errors.Is(err, record.ErrNotFound) || errors.Is(err, record.ErrCorrupt):
		// Expired or removed: it ended long ago.
		if err := r.TellJob(ctx, id, pred, false, nil); err != nil {
			return err
		}
		_, rev, err := ReadLink(ctx, r.Store, NextKey(key, pred))
		if err != nil {
			return err
		}
		return r.Store.DeleteKey(ctx, NextKey(key, pred), rev)
	case err != nil:
		return err
	}
	ended, _, err := r.SequenceEnded(ctx, cur)
	if err != nil || !ended {
		return err
	}
	return r.Ended(ctx, cur)
}

// publishMissing publishes the message kept in queued record rec (Release) unless the
// queue holds a message on its subject: one published before and not yet run, which a
// second would only copy. A job's subject carries its id, so the server's index of
// the subject answers without a scan. It reports whether it published.
func (r *Releaser) publishMissing(ctx context.Context, rec *record.Record) (bool, error) {
	if rec.Message == nil {
		return false, nil
	}
	s, err := r.stream(ctx)
	if err != nil {
		return false, err
	}
	in := false
	err = retry.Do(ctx, func(ctx context.Context) error {
		_, err := s.GetLastMsgForSubject(ctx, rec.Message.Subject)
		in = err == nil
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		return err
	})
	if err != nil || in {
		return false, err
	}
	return true, r.Release(ctx, rec)
}
