// Package consumer runs workq workers: a pool of goroutines that pull jobs from a
// queue's durable consumer, run a Handler on each, and commit the outcome.
//
// # Fenced processing (the default)
//
// JetStream hands each job to one worker at a time and, when a worker stops
// acknowledging progress for AckWait, to another. It also accepts a late ack from the
// first worker, so an acknowledgement alone cannot stop a superseded worker from
// committing. workq therefore keeps a job record in a KV bucket and processes a
// delivery in three steps:
//
//  1. Claim: write the record as running, with this delivery's count, the consumer's
//     incarnation and the worker's identity, by compare-and-set. The revision written
//     is the job's fencing token (Job.FencingToken), which grows with every claim.
//     Deliveries are ordered by (consumer incarnation, delivery count), so a consumer
//     deleted and re-created, which restarts delivery counts, does not confuse them:
//     a delivery older than the record's is stale and does nothing; a job whose record
//     says done was committed already and is acked without running again. The
//     attempt written counts every delivery since the record's that may have run,
//     also one whose worker died before writing anything. A first delivery that the
//     worker can prove is still its own (AckWait has not passed since the pull that
//     brought it) writes its claim lazily, after ClaimDelay or at commit — unless the
//     server fired it from a schedule (a delayed job, a periodic firing): the server
//     may fire a job twice across a change of stream leader, without a message id
//     the stream could deduplicate, or fire one as it is cancelled, so such a job
//     claims before it runs and a second copy finds the firing's record.
//  2. Run the handler, heartbeating (InProgress) at a third of AckWait. A heartbeat
//     that finds the claim overwritten cancels the handler's context with ErrStale.
//  3. Commit: write done and the result by compare-and-set on the claim. If the claim
//     was overwritten the commit is refused, logged as "job <id> was reassigned" and
//     counted; the worker does not ack. Only after a commit does it ack, and it waits
//     for the server to confirm the ack.
//
// So at most one result is committed per job, even when a paused or cut-off worker
// comes back after its job was handed to another. Handlers that touch external
// resources can use the fencing token or call Job.Fence before an irreversible step.
//
// Handlers that are idempotent can opt out with Unfenced: no claim, no commit, a plain
// ack — at-least-once and fastest (and a firing the server made twice runs twice).
//
// # Outcomes
//
// A nil error commits. Any other error is recorded on the job record and the job is
// retried after Backoff (default exponential with jitter); RetryAfter sets the delay;
// Permanent and an exhausted attempt limit move the job to the queue's dead-letter
// stream with headers saying why. A panic is an error carrying its stack; the worker
// goes on.
package consumer
