package consumer

import "sync/atomic"

// Stats counts what a worker did since New. Every field only grows.
//
// A delivery that reached a handler slot ends one way, named as the outcome label of
// workq_jobs_processed_total, a span's workq.outcome and the "ending" of its log
// line name it; each field below that counts endings says which name it counts.
type Stats struct {
	Started     uint64 // handler runs started
	Committed   uint64 // committed: runs that succeeded and committed (acked, unfenced)
	Retried     uint64 // retried: runs that failed and were scheduled again
	Dead        uint64 // dead: jobs moved to dead letters
	Reassigned  uint64 // reassigned: commits or outcomes refused, another delivery owned the job
	AlreadyDone uint64 // already_ended: copies of jobs that ended, of earlier enqueues of the id, and repeats within the duplicate window: ended without running
	Watched     uint64 // watched: deliveries that found another run holding the job, put back for the rest of its lease, a second at a time
	// Stale is Watched, under its old name.
	//
	// Deprecated: use Watched; "stale" names a run whose claim was taken (ErrStale).
	Stale      uint64
	Cancelled  uint64 // cancelled: runs stopped, and deliveries of cancelled jobs dropped without running
	Busy       uint64 // busy: deliveries put back because another message with the same id was live
	Early      uint64 // early: deliveries put back because their job's retry time had not come
	HandedBack uint64 // handed_back: jobs given back unfinished (and, counted here too, deliveries never started) when the worker stopped
	Errors     uint64 // failed: server errors that kept an outcome from being written (the job is redelivered)
	// UniqueDropped (unique_dropped) counts unique jobs cancelled unrun because another
	// job held their key: their enqueue had been taken over as an orphan before they
	// were stored.
	UniqueDropped uint64
	Dropped       uint64 // buffered deliveries dropped because the workers' consumer was re-created
	Heartbeats    uint64 // progress reports sent
	Redelivered   uint64 // deliveries with a delivery count above 1
	// GroupCommits and GroupCommitted count, with GroupCommit on, the atomic batches
	// the worker's record writes went out in and the writes they held; the other
	// writes went out one by one (alone, or in a batch the server refused because one
	// of its compare-and-sets lost).
	GroupCommits   uint64
	GroupCommitted uint64
}

type counters struct {
	started, committed, retried, dead, reassigned, alreadyDone, watched, busy, early, dropped,
	handedBack, heartbeats, redelivered, errors, cancelled, uniqueDropped atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Started: c.started.Load(), Committed: c.committed.Load(), Retried: c.retried.Load(),
		Dead: c.dead.Load(), Reassigned: c.reassigned.Load(), AlreadyDone: c.alreadyDone.Load(),
		Watched: c.watched.Load(), Stale: c.watched.Load(), Busy: c.busy.Load(), Early: c.early.Load(), Dropped: c.dropped.Load(), HandedBack: c.handedBack.Load(),
		Heartbeats: c.heartbeats.Load(), Redelivered: c.redelivered.Load(), Errors: c.errors.Load(),
		Cancelled: c.cancelled.Load(), UniqueDropped: c.uniqueDropped.Load(),
	}
}
