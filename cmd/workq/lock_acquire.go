package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/kvlock"
)

// lockAcquireFlags is `workq lock acquire`: the lock's name and the flags.
type lockAcquireFlags struct {
	*lockFlags
	waitFlags
	name    string
	jsonOut bool
	quiet   bool
}

func (a *app) lockAcquireCommand(lf *lockFlags) *cobra.Command {
	f := &lockAcquireFlags{lockFlags: lf}
	cmd := &cobra.Command{
		Use:   "acquire <name>",
		Short: "Take a lock for a fixed lease and print its token (like GET_LOCK)",
		Long: `Take the lock for --ttl and exit, printing the fencing token. The lock is not
renewed: it frees itself when the lease ends, or earlier with
'workq lock release <name> --token <token>'. Waits up to --timeout for the lock
(-n: not at all); exits 1 if it could not be taken.`,
		Example: `  token=$(workq lock acquire -q backup --ttl 10m) && ./backup.sh && workq lock release backup --token "$token"`,
		Args:    exactArgs(1, "<name>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.name = args[0]
			return a.execute(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	f.waitFlags.register(fl, 30*time.Second, "how long the lock is held unless released")
	fl.BoolVar(&f.jsonOut, "json", false, "print JSON")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print only the token")
	return cmd
}

func (f *lockAcquireFlags) validate() error { return f.waitFlags.validate() }

// run takes the lock, not to be renewed, and prints its token.
func (f *lockAcquireFlags) run(ctx context.Context, a *app) error {
	c, l, err := a.locker(ctx, "lock acquire", f.lockFlags, false)
	if err != nil {
		return err
	}
	defer c.Close()
	lk, err := f.acquire(ctx, a, l, f.name, kvlock.NoRenew())
	if err != nil {
		return lockedMessage(f.name, err)
	}
	switch {
	case f.jsonOut:
		return writeJSON(a.stdout, map[string]any{"name": lk.Name(), "token": lk.Token(), "ttl": lk.TTL().String(),
			"expires": time.Now().Add(lk.TTL()).UTC()})
	case f.quiet:
		fmt.Fprintln(a.stdout, lk.Token())
	default:
		fmt.Fprintf(a.stdout, "acquired lock %q for %s: token %d\n", lk.Name(), lk.TTL(), lk.Token())
	}
	return nil
}
