// Package consumer runs workq workers: a pool of goroutines that pull jobs from a
// queue's durable consumer, run a Handler on each, and commit the outcome.
//
// # Fenced processing (the default)
//
// JetStream hands each job to one worker at a time and, when a worker stops
// acknowledging progress for AckWait, to another. It also accepts a late ack from the
// first worker, and a crashed single server forgets its last deliveries and sends them
// again as first deliveries, so neither acknowledgements nor delivery counts can stop
// a superseded worker. workq therefore keeps a job record in a KV bucket, and the
// record alone decides (docs/delivery.md):
//
//  1. Claim, before the handler starts: write the record as running, with a new run
//     id, a lease (the worker's AckWait) and attempt = the record's + 1, by
//     compare-and-set — blind, as a create, for a job that has no record. The revision
//     written is the job's fencing token (Job.FencingToken), which grows with every
//     claim. A delivery whose record says the same enqueue was done or cancelled is
//     acked without running, whatever its delivery count, and so is a copy of an
//     earlier enqueue of the id, or a repeat of the record's within the duplicate
//     window; one whose job another run holds is put back (a second at a time)
//     until that run's lease runs out, and any worker takes the job over once the
//     record's last write is a lease old by the records server's clock.
//  2. Run the handler, heartbeating (InProgress) at a third of AckWait and renewing
//     the claim by compare-and-set at each heartbeat. A renewal that finds the claim
//     taken cancels the handler's context with ErrStale (ErrCancelled after a cancel).
//  3. Settle: write done and the result (or the retry, or the dead letter) by
//     compare-and-set on the claim, then ack. A write whose reply was lost is resolved
//     by reading the record, never guessed. If the claim was taken the commit is
//     refused, logged as "job <id> was reassigned" and counted; the worker does not
//     ack.
//
// So at most one result is committed per enqueue, no handler starts after its job's
// record ended, and attempts count runs. Handlers that touch external resources can
// use the fencing token or call Job.Fence before an irreversible step.
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
//
// # Examples
//
// The Example functions of this package run as tests: a worker, a Mux, typed jobs
// (RouteArgs), fencing tokens, metrics. examples/service in the repository is a
// complete service with retries, a periodic schedule, metrics and a graceful
// shutdown, and tests its handlers with package consumertest.
//
// # Further reading
//
// docs/guarantees.md says what a job can count on, docs/delivery.md how the worker
// keeps it, and docs/operating.md what operators meet: AckWait (a crashed worker's
// job waits AckWait before another worker takes it), prefetched jobs counted as
// running, limits, pause, cancel, durability modes and the worker options worth
// knowing. docs/metrics.md lists the metrics.
package consumer
