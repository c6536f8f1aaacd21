package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
)

// DefaultUniqueGrace is how long a unique key reserved for a job that is nowhere to
// be seen (neither scheduled, queued, recorded nor finished) counts as held by a
// producer still publishing it (UniqueGrace). 30 seconds: a publish that meets a
// leader election waits out the election (4–9 s on nats-server 2.15) and the
// producer's retries, and a key whose producer died between its reservation and its
// publish stays blocked no longer than that.
const DefaultUniqueGrace = 30 * time.Second

// maxUniqueTries bounds the compare-and-set rounds of one reservation: each lost
// round means another producer or worker wrote the key meanwhile.
const maxUniqueTries = 16

// UniqueGrace sets how long a unique key whose job is nowhere to be seen counts as
// held by a producer that is still publishing the job; past it, the key is taken
// over (a producer that died before publishing leaves it so). A shorter grace frees
// such keys sooner; too short, and a producer whose publish is slow (a leader
// election) has its job taken over: the job is then reported as a duplicate if the
// producer sees it, and dropped unrun by the worker that gets it, so two jobs with
// the key never run. Default DefaultUniqueGrace (30 s).
func UniqueGrace(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second {
			return option.Invalid("UniqueGrace", d, "at least 1s")
		}
		c.uniqueGrace = d
		return nil
	}
}

// Unique makes the job unique by key: while a job with the same key is scheduled,
// queued, running or retrying (and for UniqueFor after it ended), the enqueue
// stores nothing and reports a duplicate, with the holding job's id in JobInfo.ID
// (and its sequence when known). Producers racing each other with the same key get
// one job accepted and the others reported duplicates. A key is any text a job id
// may be (ID), carried on the wire the same way. The key is held in the queue's bucket WORKQ_<queue>_UNIQUE, which the
// first unique enqueue creates; docs/unique-jobs.md says how. Default: none,
// and a job without a key costs nothing more.
func Unique(key string) EnqueueOption { return func(j *Job) { j.Unique = key } }

// UniqueFor keeps a unique job's key held for d after the job ended (done, dead or
// cancelled), so that no job with the key is accepted until then. d is rounded up to
// whole seconds (the server's per-key TTL). Default 0: the key is free once the job
// has ended. It applies only with Unique.
func UniqueFor(d time.Duration) EnqueueOption { return func(j *Job) { j.UniqueFor = d } }

// checkUnique validates j's unique key and keep period.
func checkUnique(j *Job) error {
	if j.Unique == "" {
		if j.UniqueFor != 0 {
			return option.Invalid("UniqueFor", j.UniqueFor, "Unique beside it")
		}
		return nil
	}
	if err := queue.CheckUniqueKey(j.Unique); err != nil {
		return err
	}
	if j.UniqueFor < 0 || j.UniqueFor > queue.MaxKeep {
		return option.Invalid("UniqueFor", j.UniqueFor, "0 to "+queue.MaxKeep.String())
	}
	return nil
}

// reservation is where a unique enqueue stands with its key.
type reservation struct {
	key    string
	rev    uint64    // the revision this enqueue wrote; 0 if the key names the job already (a retried enqueue)
	since  time.Time // when the reservation started
	holder string    // not "": the key is held by this job; the enqueue is a duplicate
	seq    uint64    // the holder's sequence, if known
}

// reserve reserves j's unique key for j, or finds the job that holds it. The key is
// taken over, by compare-and-set, from a holder that ended more than its keep period
// ago, and from one that is nowhere to be seen past the grace (see takeOrphan).
func (p *Producer) reserve(ctx context.Context, j *Job) (*reservation, error) {
	u, err := p.uniques.Open(ctx, p.js, p.objects)
	if err != nil {
		return nil, err
	}
	mine := queue.Reservation{Job: j.ID, At: time.Now(), Keep: queue.KeepSeconds(j.UniqueFor)}
	res := &reservation{key: j.Unique, since: time.Now()}
	rev, err := u.Create(ctx, j.Unique, mine)
	for try := 0; jserr.IsConflict(err) && try < maxUniqueTries; try++ {
		var e queue.UniqueEntry
		var found bool
		e, found, err = u.Get(ctx, j.Unique)
		if err != nil {
			break
		}
		if !found {
			rev, err = u.Create(ctx, j.Unique, mine)
			continue
		}
		if e.Job == j.ID && e.FinishedAt.IsZero() {
			// This job holds it: an enqueue of the same id again (a retry).
			return res, nil
		}
		var v holderVerdict
		v, err = p.judge(ctx, e)
		if err != nil {
			break
		}
		switch {
		case v.held:
			res.holder, res.seq = e.Job, v.seq
			return res, nil
		case v.ended:
			rev, err = u.Update(ctx, j.Unique, mine, e.Revision)
		default:
			var dup bool
			rev, dup, err = p.takeOrphan(ctx, u, j.Unique, e, mine)
			if dup {
				res.holder, res.seq = e.Job, rev
				return res, nil
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reserve unique key %s: %w", j.Unique, err)
	}
	res.rev = rev
	return res, nil
}

// holderVerdict is what a producer makes of the job a unique key names.
type holderVerdict struct {
	held  bool   // it holds the key: scheduled, queued, running, retrying, within its keep period, or being published
	ended bool   // it ended more than its keep period ago: the key is free
	seq   uint64 // its sequence, when known
}

// judge decides whether e's job still holds its key; neither held nor ended means an
// orphan: a reservation older than the grace whose job is nowhere to be seen.
func (p *Producer) judge(ctx context.Context, e queue.UniqueEntry) (holderVerdict, error) {
	now := time.Now()
	if !e.FinishedAt.IsZero() {
		// Its worker wrote the end; the server's time of that write starts the keep.
		if now.Before(e.Written.Add(e.KeepDuration())) {
			return holderVerdict{held: true}, nil
		}
		return holderVerdict{ended: true}, nil
	}
	st, err := p.sighting(ctx, e.Job)
	switch {
	case err != nil:
		return holderVerdict{}, err
	case st.live:
		return holderVerdict{held: true, seq: st.seq}, nil
	case st.ended:
		if now.Before(st.finishedAt.Add(e.KeepDuration())) {
			return holderVerdict{held: true, seq: st.seq}, nil
		}
		return holderVerdict{ended: true, seq: st.seq}, nil
	case now.Sub(e.Written) < p.cfg.uniqueGrace:
		// Not stored yet: its producer is between its reservation and its publish.
		return holderVerdict{held: true}, nil
	}
	return holderVerdict{}, nil
}

// sighting is what the queue shows of a job.
type sighting struct {
	live       bool // scheduled, queued, running or retrying
	ended      bool // its record says done, dead or cancelled
	finishedAt time.Time
	seq        uint64
}

// sighting looks for job id in the order of its life: its schedule, its message
// (at any priority level), its record. Each stage is written before the one before it goes (the server stores
// a fired job before it removes the schedule; a worker writes the final record
// before it acks), so a job that moves on between two reads is seen at its later
// stage, and nothing seen means the job was never stored, or its record expired.
func (p *Producer) sighting(ctx context.Context, id string) (sighting, error) {
	for _, subject := range p.names.JobSubjects(id) {
		m, err := p.lastMsg(ctx, subject)
		if err == nil {
			return sighting{live: true, seq: m.Sequence}, nil
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return sighting{}, fmt.Errorf("look for job %s: %w", id, err)
		}
	}
	rec, err := p.records.Get(ctx, id)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return sighting{}, nil
	case err != nil:
		return sighting{}, fmt.Errorf("look for job %s: %w", id, err)
	case rec.State.Terminal():
		return sighting{ended: true, finishedAt: rec.FinishedAt, seq: rec.Sequence}, nil
	}
	return sighting{live: true, seq: rec.Sequence}, nil
}

// takeOrphan takes key over from e's job, which is nowhere to be seen past the
// grace, for mine, in two compare-and-sets with a second look between them. The
// first marks the key (Takeover); a worker that gets the orphan's message after it
// (the message was published late) clears the mark before it runs the job, which
// fails the second compare-and-set. A message stored before the mark is seen by the
// second look. So the orphan either runs and keeps the key, or never runs. It
// returns the revision written, or dup with the orphan's sequence when the second
// look found it.
func (p *Producer) takeOrphan(ctx context.Context, u *queue.Uniques, key string, e queue.UniqueEntry, mine queue.Reservation) (rev uint64, dup bool, err error) {
	mark := e.Reservation
	mark.Takeover, mark.At = mine.Job, time.Now()
	marked, err := u.Update(ctx, key, mark, e.Revision)
	if err != nil {
		return 0, false, err
	}
	st, err := p.sighting(ctx, e.Job)
	if err != nil {
		return 0, false, err
	}
	if st.live || st.ended {
		// Stored after all: leave the key to it (unless its worker did already).
		_, _ = u.Update(ctx, key, e.Reservation, marked)
		return st.seq, true, nil
	}
	rev, err = u.Update(ctx, key, mine, marked)
	return rev, false, err
}

// settle finishes a unique enqueue whose job was published (err nil) or not. A
// reservation whose job was provably not stored (notStored) is released, so the key
// is not blocked for the grace; one whose publish may have landed (a timeout, a lost
// reply, ctx ended) is kept: the job may be stored and running, and its worker's
// hold writes nothing that a release would conflict with. If it was not stored after
// all, the key is an orphan that the next enqueue takes over after the grace. A
// publish that took more than half the grace may have been taken for
// an orphan's: the key is read again, and a takeover mark on it cleared (which fails
// that takeover); if another job holds the key already, this job will be dropped
// unrun by its worker, and the enqueue is reported a duplicate of that job.
func (p *Producer) settleUnique(ctx context.Context, r *reservation, id string, err error) (holder string) {
	if r.rev == 0 {
		return ""
	}
	u, oerr := p.uniques.Open(ctx, p.js, p.objects)
	if oerr != nil {
		return ""
	}
	if err != nil {
		if notStored(err) {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = u.Release(rctx, r.key, r.rev)
		}
		return ""
	}
	if time.Since(r.since) < p.cfg.uniqueGrace/2 {
		return ""
	}
	for range maxUniqueTries {
		e, found, gerr := u.Get(ctx, r.key)
		switch {
		case gerr != nil || !found:
			return ""
		case e.Job != id:
			return e.Job
		case e.Takeover == "":
			return ""
		}
		clear := e.Reservation
		clear.Takeover = ""
		if _, uerr := u.Update(ctx, r.key, clear, e.Revision); !jserr.IsConflict(uerr) {
			return ""
		}
	}
	return ""
}

// notStored reports whether a publish that failed with err provably stored nothing:
// the stream answered with a refusal (an API error), or the client refused the
// message before sending it (larger than the server takes). Every other error — a
// timeout, a lost reply, a context that ended, a connection lost — leaves the
// outcome unknown, also when the last try met no leader: an earlier try may have
// landed.
func notStored(err error) bool {
	if jserr.Transient(err) || errors.Is(err, context.Canceled) {
		return false // retried until the context ended: an earlier try may have landed
	}
	var api *jetstream.APIError
	return errors.As(err, &api) || errors.Is(err, nats.ErrMaxPayload)
}
