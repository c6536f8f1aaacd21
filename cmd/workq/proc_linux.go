//go:build linux

package main

import (
	"runtime"
	"syscall"
)

// childProcAttr puts a command in its own process group, so that --timeout, a lost
// job or a lost lock can kill all of it, and has the kernel SIGKILL it when workq
// dies, however it dies (SIGKILL, the OOM killer, a crash): a command that outlived
// workq would run on with nobody holding its lock or its job.
//
// The kernel sends the signal when the thread that started the command exits, not
// the process: the command must be started between pinThread and its unpin.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// pinThread locks the calling goroutine to its OS thread until the returned
// function is called, which must be after the command started by this goroutine has
// been waited for. Otherwise the Go runtime could end the thread (it ends a thread
// whose locked goroutine exits) and the kernel would kill the command with it.
func pinThread() (unpin func()) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
