package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/workq/workq/kvlock"
)

// lockReleaseFlags is `workq lock release`: the lock's name and which grant to
// release.
type lockReleaseFlags struct {
	*lockFlags
	name  string
	token uint64
	force bool
}

func (a *app) lockReleaseCommand(lf *lockFlags) *cobra.Command {
	f := &lockReleaseFlags{lockFlags: lf}
	cmd := &cobra.Command{
		Use:   "release <name>",
		Short: "Release a lock taken with 'lock acquire' (by its token), or any holder's with --force",
		Long: `Release the lock if it is still the grant with --token (like RELEASE_LOCK, it
fails if the lock is not held as that grant). --force releases it whoever holds
it; a live holder learns it lost the lock on its next renewal.`,
		Args: exactArgs(1, "<name>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.name = args[0]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().Uint64Var(&f.token, "token", 0, "the token 'workq lock acquire' printed")
	cmd.Flags().BoolVar(&f.force, "force", false, "release whoever holds it")
	return cmd
}

func (f *lockReleaseFlags) validate() error {
	if (f.token == 0) == !f.force {
		return errors.New("give --token (from 'workq lock acquire') or --force")
	}
	return nil
}

// run releases the grant with the token, or whichever holds the lock with --force.
func (f *lockReleaseFlags) run(ctx context.Context, a *app) error {
	c, l, err := a.locker(ctx, "lock release", f.lockFlags, false)
	if err != nil {
		return err
	}
	defer c.Close()
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	h, err := l.ForceRelease(octx, f.name, f.token)
	if err != nil {
		if errors.Is(err, kvlock.ErrNotHeld) {
			return fmt.Errorf("lock %q was not released: %v", f.name, strip(errors.Unwrap(err)))
		}
		return err
	}
	fmt.Fprintf(a.stdout, "released lock %q (held by %s, pid %d)\n", f.name, h.Owner, h.PID)
	return nil
}
