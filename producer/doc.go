// Package producer enqueues workq jobs onto a queue: one at a time, or in pipelined
// batches, deduplicated by job id, and looks up a job's record.
//
// A queue named Q is a JetStream stream WORKQ_Q (WorkQueue retention) whose jobs are
// published to workq.Q.jobs.<id>; New creates the queue's streams and bucket when
// they are missing, so producers and workers may start in any order.
//
// Job ids are the dedup key: enqueuing an id that was enqueued within the queue's
// duplicate window (default 2 minutes) stores nothing and reports Duplicate. Without
// an ID option a unique, time-sortable id is generated.
//
// A unique key (Unique) goes further than the window: no second job with the key is
// accepted while one is scheduled, queued, running or retrying, nor for UniqueFor
// after it ended; the duplicate names the job that holds the key.
//
// # Examples
//
// The Example functions of this package run as tests. examples/service in the
// repository is a complete service, producer and worker in one program;
// examples/outbox is a relay that enqueues the rows of a database outbox, for jobs
// that must be enqueued if and only if a transaction commits.
//
// # Further reading
//
// The repository's docs directory tells each topic once: docs/scheduling.md (delayed
// and periodic jobs), docs/priorities.md, docs/unique-jobs.md, docs/transactions.md
// (job ids as idempotency keys, the outbox), docs/guarantees.md, and
// docs/wire-format.md (the streams, headers and job record, for producers in other
// languages).
package producer
