//go:build !linux

package main

import "syscall"

// childProcAttr puts a command in its own process group, so that --timeout, a lost
// job or a lost lock can kill all of it. Only Linux can also tie the command's life
// to workq's (see proc_linux.go); elsewhere a command outlives a workq that is
// killed with SIGKILL.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// pinThread is needed only on Linux, for the parent-death signal.
func pinThread() (unpin func()) { return func() {} }
