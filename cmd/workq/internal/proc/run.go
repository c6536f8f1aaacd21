package proc

import (
	"os/exec"
	"time"
)

// Ends are what ends a command that Run supervises before it exits by itself.
type Ends struct {
	// Stop, when it fires, ends the command's process group: SIGTERM, then SIGKILL
	// once the command has exited or Grace has passed, so that none of its children
	// runs on after its job or its lock has gone to someone else. `workq work` stops
	// a job's command on --timeout, a lost job or a drain that runs out; `workq lock
	// run` when its lock is lost. nil: never.
	Stop <-chan struct{}
	// Grace is how long the group has between Stop's SIGTERM and its SIGKILL
	// (--kill-grace). 0 kills at once.
	Grace time.Duration
	// Term, when it fires, sends SIGTERM to the group and leaves the rest to the
	// command: the user asked to stop (SIGINT or SIGTERM to `workq lock run`), and
	// the command decides how. Run then watches nothing more: Stop no longer ends the
	// group. nil: never.
	Term <-chan struct{}
}

// Run starts cmd, made by Command with its I/O and environment set, waits for it,
// and ends its process group as ends says. The error is Start's (the command did
// not run); how the command ended is in Exit.
//
// Run starts and waits for the command on one OS thread: on Linux the thread that
// starts the guard must live until the command has ended (see Command).
func Run(cmd *exec.Cmd, ends Ends) (Exit, error) {
	unpin := pinThread()
	defer unpin()
	if err := cmd.Start(); err != nil {
		return Exit{}, err
	}
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		select {
		case <-exited:
			return
		case <-ends.Term:
			terminate(pgid)
			return
		case <-ends.Stop:
		}
		close(stopped)
		stopGroup(pgid, ends.Grace, exited)
	}()
	err := cmd.Wait()
	close(exited)
	select {
	case <-stopped:
		return Exit{Stopped: true, Err: err}, nil
	default:
		return Exit{Err: err}, nil
	}
}
