package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/workq/workq/admin"
)

// confirmedFlags is a command that deletes a queue's data for good and so wants
// --yes: queue purge, queue rm, dlq purge.
type confirmedFlags struct {
	queue string
	yes   bool
	// what is the command's path, the name of its connection.
	what string
	// warning says what the command deletes, with %s for the queue.
	warning string
	// remove deletes it and returns the line that says what was deleted.
	remove func(ctx context.Context, adm *admin.Admin, queue string) (string, error)
}

// confirmedCommand completes cmd (its use and help) into the command that runs f
// on the queue its argument names.
func (a *app) confirmedCommand(cmd *cobra.Command, f *confirmedFlags) *cobra.Command {
	cmd.Args = exactArgs(1, "<queue>")
	cmd.ValidArgsFunction = a.completeQueues
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		f.queue = args[0]
		return a.execute(cmd.Context(), f)
	}
	cmd.Flags().BoolVarP(&f.yes, "yes", "y", false, "confirm")
	return cmd
}

func (f *confirmedFlags) validate() error {
	if !f.yes {
		return fmt.Errorf("%s; add --yes to confirm", fmt.Sprintf(f.warning, f.queue))
	}
	return nil
}

// run deletes and says what it deleted.
func (f *confirmedFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, f.what, func(ctx context.Context, c *conn) error {
		done, err := f.remove(ctx, c.admin, f.queue)
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, done)
		return nil
	})
}
