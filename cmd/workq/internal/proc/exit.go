package proc

import (
	"errors"
	"os/exec"
	"strconv"
	"syscall"
)

// Exit is how a command that Run started ended.
type Exit struct {
	// Stopped says that Ends.Stop fired before the command exited, and the command's
	// group was ended: the command did not end by itself.
	Stopped bool
	// Err is what waiting for the command returned: nil when it exited with status 0,
	// an *exec.ExitError when it exited otherwise or a signal killed it, any other
	// error when it could not be waited for.
	Err error
}

// Status is the command's end as a shell tells it: its exit status, or 128 plus the
// signal that killed it (signaled then true). ok is false when the command could not
// be waited for (Err says why).
func (x Exit) Status() (status int, signaled, ok bool) {
	if x.Err == nil {
		return 0, false, true
	}
	var ee *exec.ExitError
	if !errors.As(x.Err, &ee) {
		return 0, false, false
	}
	if sig, ok := signalOf(ee); ok {
		return 128 + int(sig), true, true
	}
	return ee.ExitCode(), false, true
}

// String says how the command ended, for a job's error: "command exited with status
// 3" or "command killed by signal killed".
func (x Exit) String() string {
	var ee *exec.ExitError
	switch {
	case x.Err == nil:
		return "command exited with status 0"
	case !errors.As(x.Err, &ee):
		return "command: " + x.Err.Error()
	}
	if sig, ok := signalOf(ee); ok {
		return "command killed by signal " + sig.String()
	}
	return "command exited with status " + strconv.Itoa(ee.ExitCode())
}

// signalOf is the signal that killed the process of ee, if one did.
func signalOf(ee *exec.ExitError) (syscall.Signal, bool) {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal(), true
	}
	return 0, false
}
