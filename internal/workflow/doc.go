// Package workflow holds what producers, workers and operators share about
// workflows (docs/workflows.md): the task ids, the check of a workflow's graph, the
// decision of what a parent's end does to a waiting task (a pure function over the
// task's record), and the releaser that carries it out on the engine.
//
// A workflow is its tasks' job records: each names its workflow, its task, its
// parents and its dependents; a task that waits says for which parents
// (waiting_for), and keeps its job message in its record (message) until the write
// that releases it: the queue holds nothing of a task that waits. Whoever ends a task — the
// worker that commits or dead-letters it, a canceller (of a task that does not run:
// one cancelled as it runs ends when its run does, settled by its worker), or a later
// delivery of the task's own message, which stays in the queue until its dependents
// are told — tells each dependent by compare-and-set on the dependent's record.
// Telling is idempotent (a parent leaves waiting_for once), so a crash between a
// commit and the telling is completed by whoever sees the task next, and a dependent
// is released exactly once: the write that empties its waiting_for.
package workflow
