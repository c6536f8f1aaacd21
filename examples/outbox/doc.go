// Package outbox is a sketch of the transactional outbox for workq: how to enqueue a
// job "in" a database transaction, which workq cannot join.
//
// The application writes the job as a row of an outbox table in the same
// transaction as the data it belongs to (Add, AddArgs): the row commits or rolls back
// with that data. A Relay then reads the rows not yet sent, enqueues each with the
// row's id as the job id, and marks the row sent. A relay that dies after the
// enqueue and before the mark enqueues the row again when it restarts, with the same
// id: within the queue's duplicate window the server stores nothing new, so the job
// is in the queue once.
//
// The relay sees the table through Store. SQLStore is that table through
// database/sql, with no driver of its own (bring yours; the SQL it runs is in its
// constants); MemStore keeps rows in memory, for tests.
//
// docs/transactions.md tells the whole story and its limits.
package outbox
