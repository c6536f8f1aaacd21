// Package admin is the operator's API for workq queues: list and inspect queues,
// pause and resume them, change their settings, purge and delete them; find, list
// and cancel jobs; list, follow, wait for and cancel workflows; browse, requeue and
// purge dead letters; list, pause and remove periodic schedules. The workq CLI and
// its web dashboard are built on it, so a Go program can do whatever they do.
//
// It reads and writes the wire format of docs/wire-format.md and never creates a
// queue as a side effect: an operation on a queue that does not exist returns an
// error wrapping ErrNoQueue.
//
// # Examples
//
// The Example functions of this package run as tests: queues, pause, cancel, dead
// letters, jobs by state, limits, schedules, AckWait, workflows.
//
// # Further reading
//
// The repository's docs/operating.md explains what each operation does to running
// workers (pause, limits, cancel, AckWait); docs/wire-format.md describes the
// streams, buckets and records this package reads and writes; docs/cli.md the
// `workq` commands built on it.
package admin
