//go:build linux

package proc

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// The commands of `workq lock run` and `workq work` must not outlive workq: a
// command left running after workq died would hold no lock once the lease ran out,
// or run a job beside its redelivered copy. The kernel can signal a process when its
// parent dies (the parent-death signal), but only the direct child, and a command's
// own children (a shell script's) would run on. So on Linux workq starts each command
// through a guard, a copy of itself in the command's process group: the kernel
// signals the guard (guardSignal) when workq dies, and the guard kills the whole
// group with SIGKILL (Guard).

// Guarded says whether Command starts commands under a guard: true on Linux, the one
// system with a parent-death signal. The program must then run Guard when started
// as `GuardName -- command [args]`.
const Guarded = true

// Command returns the Cmd that runs argv in a process group of its own (so that
// --timeout, a lost job or a lost lock can signal all of it) under a guard that
// kills that group if workq dies, however it dies (SIGKILL, the OOM killer, a
// crash): this program re-executed as `GuardName -- argv…`. A command that cannot
// be found fails here, as a Start error would. Run it with Run.
func Command(argv []string) (*exec.Cmd, error) {
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find workq's own executable for the command's guard: %w", err)
	}
	cmd := exec.Command(self, append([]string{GuardName, "--"}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: guardSignal}
	return cmd, nil
}

// pinThread locks the calling goroutine to its OS thread until the returned
// function is called, which must be after the command started by this goroutine has
// been waited for. The kernel sends the parent-death signal when the thread that
// started the guard exits, not the process, and the Go runtime could end the thread
// (it ends a thread whose locked goroutine exits), signalling the guard with it.
func pinThread() (unpin func()) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
