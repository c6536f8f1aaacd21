package proc

import (
	"errors"
	"fmt"
	"os/exec"
)

// Find checks that the command name can be run (found in $PATH when it has no
// slash), so that a command given by mistake fails before anything connects, with
// a message naming it: `command "nope": executable file not found in $PATH`.
func Find(name string) error {
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("command %q: %v", name, errors.Unwrap(err))
	}
	return nil
}
