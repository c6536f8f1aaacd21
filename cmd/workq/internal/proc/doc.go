// Package proc starts and supervises the commands that `workq work` (one per job)
// and `workq lock run` run for the user, so that both commands handle processes
// the same way, from one place:
//
//   - each command runs in a process group of its own, so that a timeout, a lost job
//     or a lost lock ends the command together with its children (Run, Ends);
//   - on Linux, each command runs under a guard, a copy of workq in the command's
//     group, that kills the group if workq dies however it dies (Command, Guard), so
//     that no command runs on without its job or its lock;
//   - a command's end is told as a shell tells it (Exit).
//
// The code builds on Unix only: it signals process groups.
package proc
