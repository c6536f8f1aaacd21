// Package kvlock provides distributed locks, semaphores and rate limiters on NATS
// JetStream: named locks with a lease (TTL) and fencing tokens, which a process can
// wait on without polling; semaphores admitting up to n holders; and rate limiters
// admitting n permits per time window across every process sharing a name.
//
// # Locks
//
// New provisions a KV bucket (default DefaultBucket, "WORKQ_LOCKS"; History 1, with
// limit markers so per-key TTLs work and watchers see expiries) and returns a
// Locker:
//
//	l, err := kvlock.New(ctx, js)
//	lk, err := l.Acquire(ctx, "invoice-42", kvlock.TTL(5*time.Second)) // waits until free or ctx ends
//	defer lk.Release(ctx)                                              // ErrNotHeld if it was lost
//	err = store.Write(lk.Context(), data, lk.Token())                  // fenced write
//
// Acquire waits until the lock is free or its context ends: the context's deadline
// plays the part of MySQL GET_LOCK's timeout, and a timed-out Acquire returns an
// error wrapping both ErrLocked and context.DeadlineExceeded. Waiting watches the
// lock's key, so a release or an expiry wakes a waiter at once; there is no polling
// interval. Waiters are not queued: when a lock frees, one of them (or a newcomer)
// wins. TryAcquire returns at once with ErrLocked, naming the holder (a
// *LockedError). Do acquires, runs a function with the lock's context and token, and
// releases: with an object id as the name, it is a pool of locks keyed by id.
//
// A lock's value is a JSON document naming its holder (owner label, host, process
// id, time acquired, lease), so `nats kv get WORKQ_LOCKS <name>` tells who holds it.
//
// # Leases, sub-second TTLs and keepalive
//
// A lock is a lease of TTL (default DefaultTTL, 10 s; minimum MinTTL, 50 ms). While
// held, it is renewed every third of the lease by re-publishing its value with the
// previous revision expected and the server-side TTL set again (KeyValue.Update would
// drop the TTL). The server's per-key TTL has one-second granularity, so sub-second
// leases do not rely on it alone:
//
//   - a waiter that has watched a held key stay at the same revision for the whole
//     lease recorded in it, on the waiter's own monotonic clock from when it first
//     saw that revision, takes the lock over with a compare-and-set on that revision;
//   - a holder that has not managed to renew within 90% of its lease, counted on its
//     own clock from when it sent its last successful write, considers the lock lost:
//     Lost is closed and Context ends with ErrLost. A renewal that finds the key
//     changed does the same at once.
//
// No clock synchronisation is needed: each side only measures an interval on its own
// clock, and the holder's interval starts no later than the waiter's. So a holder
// that is killed, paused or cut off is superseded about one lease after its last
// renewal, and learns of it within the lease. When nobody is waiting, the server's
// TTL (the lease rounded up to whole seconds) removes an abandoned lock as a backstop.
//
// For code that never releases its locks, NoRenew makes a lock a fixed lease that
// frees itself one TTL after its grant: a process already waiting gets it about one
// TTL later (sub-second TTLs work), one that starts waiting later gets it at most one
// TTL after it started watching, and with nobody waiting the server removes it after
// the TTL rounded up to whole seconds.
//
// # What a lock guarantees, and what it does not
//
// The server decides every grant atomically (compare-and-set on the key's revision),
// so two processes are never granted the same lock at once by the server, and Release
// never removes another holder's lock. Release's purge marker names the grant it
// freed (header Kvlock-Released-By), so a release whose reply was lost and that is
// sent again knows the lock was released, not taken over. But a lock is a lease: a holder that stops
// running longer than its lease (a GC pause, swapping, SIGSTOP, a slow disk) may still
// be executing after its lease ran out and another process was granted the lock.
// Lost and Context tell the holder as soon as it runs again; they cannot stop code
// that is not running. Where correctness matters, fence: pass Token to the protected
// resource, and have it reject any token lower than the highest it has accepted.
//
// Tokens are the KV revision (the bucket stream's sequence) of the grant: they
// strictly increase across successive grants of a name — and across all names in the
// bucket — including releases, expiries, takeovers and server restarts, as long as the
// bucket's stream is not deleted and recreated (its sequence would start again).
//
// Durability follows the server: a grant is acknowledged once stored, but a server
// that fsyncs periodically (nats-server's default: every 2 minutes) can lose
// acknowledged writes in a power failure, and with them a held lock; run the server
// with sync_interval: always (or use a replicated bucket, Replicas(3) on a cluster) if
// that matters. On a cluster, replicated buckets report conflicts with error 10164 as
// well as 10071; both are treated as "held by someone else".
//
// # Names
//
// Lock and semaphore names are encoded, so any non-empty string of up to MaxNameLen
// bytes works ("user:42", "s3://bucket/key", any bytes): a name made only of
// [A-Za-z0-9_-] is its own key; any other is stored as "=" + base64url(name).
// Limiter names name a stream and are validated instead: 1 to 64 of [A-Za-z0-9_-].
// Bad input returns errors wrapping ErrInvalidName or ErrInvalidOption; nothing
// panics.
//
// # Semaphores
//
// Locker.Semaphore(name, n) admits up to n holders: each holder owns one of n slot
// keys, with the same waiting, lease, keepalive, takeover, token and release
// semantics as a lock. All users of a semaphore name must agree on n.
//
// # Rate limiters
//
// Locker.Limiter(ctx, name, n, window) admits at most n permits per sliding window
// across every process using the name. It is a stream (WORKQ_LIMIT_<name>, memory
// storage) with MaxMsgsPerSubject n, Discard New per subject and MaxAge window: a
// permit is one publish, which the server admits atomically only while fewer than n
// permits are younger than the window, and rejects otherwise (error 10077). So
// enforcement takes one round trip and does not depend on client clocks. Allow does
// not block and reports when to retry; Wait blocks until a permit or the context
// ends. The server removes aged permits in a check that runs at most every 250 ms,
// so a window shorter than MinWindow (250 ms) is refused with ErrInvalidOption (it
// would admit about n per 250 ms, not n per window), and a permit is freed between
// one window and one window plus 250 ms after it was granted.
//
// # Starting before the server
//
// New and Limiter wait for the server (within their context) when it is not reachable
// yet, and Acquire keeps waiting through an outage. Connect with
// nats.RetryOnFailedConnect(true) so the connection itself can start first.
//
// # Logging and metrics
//
// The Logger option takes a *slog.Logger (default: slog.Default(), which logs lost
// locks and takeovers). The Metrics option takes a prometheus.Registerer (default:
// none) and registers workq_lock_acquire_wait_seconds, workq_locks_held,
// workq_lock_contention_total, workq_locks_lost_total and
// workq_limiter_decisions_total, with bounded labels.
//
// # Benchmarks
//
// Locks and limiters are measured beside the raw JetStream equivalent, in the same
// process, by the harness that `workq bench --scenario lock,limiter` runs; its Go
// benchmarks are `go test -run '^$' -bench 'Lock|Limiter' ./cmd/workq/internal/bench`.
// BENCHMARKS.md has the figures.
//
// # Examples
//
// The Example functions of this package run as tests. From a shell, `workq lock run`
// holds a lock while a command runs, like flock(1), and `workq lock ls` shows who
// holds what (docs/cli.md); the dashboard's locks page shows the same
// (docs/metrics.md).
package kvlock
