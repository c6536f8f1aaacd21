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
package producer
