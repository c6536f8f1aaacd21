//go:build !linux

package main

import (
	"os/exec"
	"syscall"

	"github.com/spf13/cobra"
)

// command returns the Cmd that runs argv in a process group of its own, so that
// --timeout, a lost job or a lost lock can signal all of it. Only Linux can also tie
// the command's life to workq's (see proc_linux.go); elsewhere a command outlives a
// workq that is killed with SIGKILL.
func command(argv []string) (*exec.Cmd, error) {
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, nil
}

// pinThread is needed only on Linux, for the parent-death signal.
func pinThread() (unpin func()) { return func() {} }

// guardCommand exists only on Linux.
func (a *app) guardCommand() *cobra.Command { return nil }
