package consumer

import "sync/atomic"

// Stats counts what a worker did since New. Every field only grows.
type Stats struct {
	Started     uint64 // handler runs started
	Committed   uint64 // runs that succeeded and committed (acked, unfenced)
	Retried     uint64 // runs that failed and were scheduled again
	Dead        uint64 // jobs moved to dead letters
	Reassigned  uint64 // commits or outcomes refused: another delivery owned the job
	AlreadyDone uint64 // copies of jobs that ended (committed, or dead with their dead letter out), of earlier enqueues of the id, and repeats within the duplicate window: ended without running
	Stale       uint64 // deliveries that found another run holding the job: put back for the rest of its lease, a second at a time
	Cancelled   uint64 // deliveries of cancelled jobs: runs stopped, and deliveries dropped without running
	Busy        uint64 // deliveries put back because another message with the same id was live
	Early       uint64 // deliveries put back because their job's retry time had not come
	Dropped     uint64 // buffered deliveries dropped because the workers' consumer was re-created
	HandedBack  uint64 // jobs given back unfinished when the worker stopped
	Heartbeats  uint64 // progress reports sent
	Redelivered uint64 // deliveries with a delivery count above 1
	Errors      uint64 // server errors that kept an outcome from being written (the job is redelivered)
	// UniqueDropped counts unique jobs cancelled unrun because another job held their
	// key: their enqueue had been taken over as an orphan before they were stored.
	UniqueDropped uint64
	// GroupCommits and GroupCommitted count, with GroupCommit on, the atomic batches
	// the worker's record writes went out in and the writes they held; the other
	// writes went out one by one (alone, or in a batch the server refused because one
	// of its compare-and-sets lost).
	GroupCommits   uint64
	GroupCommitted uint64
}

type counters struct {
	started, committed, retried, dead, reassigned, alreadyDone, stale, busy, early, dropped,
	handedBack, heartbeats, redelivered, errors, cancelled, uniqueDropped atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Started: c.started.Load(), Committed: c.committed.Load(), Retried: c.retried.Load(),
		Dead: c.dead.Load(), Reassigned: c.reassigned.Load(), AlreadyDone: c.alreadyDone.Load(),
		Stale: c.stale.Load(), Busy: c.busy.Load(), Early: c.early.Load(), Dropped: c.dropped.Load(), HandedBack: c.handedBack.Load(),
		Heartbeats: c.heartbeats.Load(), Redelivered: c.redelivered.Load(), Errors: c.errors.Load(),
		Cancelled: c.cancelled.Load(), UniqueDropped: c.uniqueDropped.Load(),
	}
}
