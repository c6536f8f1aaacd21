//go:build !linux

package proc

import (
	"os/exec"
	"syscall"
)

// Guarded is false: only Linux can tie a command's life to workq's (see
// command_linux.go); elsewhere a command outlives a workq that is killed with
// SIGKILL, and there is no guard to run.
const Guarded = false

// Command returns the Cmd that runs argv in a process group of its own, so that
// --timeout, a lost job or a lost lock can signal all of it. A command that cannot
// be found fails here, as a Start error would. Run it with Run.
func Command(argv []string) (*exec.Cmd, error) {
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, nil
}

// pinThread is needed only on Linux, for the parent-death signal.
func pinThread() (unpin func()) { return func() {} }
