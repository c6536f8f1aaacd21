package proc

import (
	"syscall"
	"time"
)

// terminate sends SIGTERM to the process group pgid: the command and its children
// may end as they see fit.
func terminate(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGTERM) }

// stopGroup ends the process group pgid of a command being waited for: SIGTERM to
// the group; then, once the command has exited (exited is closed) or grace has
// passed, SIGKILL to what is left of the group, so that no child of the command
// runs on after its job or its lock has gone to someone else.
func stopGroup(pgid int, grace time.Duration, exited <-chan struct{}) {
	terminate(pgid)
	select {
	case <-exited:
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
