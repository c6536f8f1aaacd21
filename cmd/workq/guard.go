package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/workq/workq/cmd/workq/internal/proc"
)

// guardCommand is the hidden `workq _guard -- command [args]`, the guard process
// that `workq work` and `workq lock run` start each command under, so that the
// command dies with workq (proc.Command, proc.Guard). It must exist: the guard is
// this binary re-executed. nil where commands run without a guard (not Linux).
func (a *app) guardCommand() *cobra.Command {
	if !proc.Guarded {
		return nil
	}
	return &cobra.Command{
		Use:                proc.GuardName + " -- command [args]",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			if len(args) == 0 {
				return usageError{errors.New(proc.GuardName + ": no command")}
			}
			if code := proc.Guard(args, a.stderr); code != 0 {
				return exitCodeError{code: code}
			}
			return nil
		},
	}
}
