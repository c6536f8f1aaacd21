package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/cmd/workq/internal/proc"
	"github.com/workq/workq/kvlock"
)

// lockRunFlags is `workq lock run`: the lock's name, the command and the flags.
type lockRunFlags struct {
	*lockFlags
	waitFlags
	name         string
	argv         []string // the command and its arguments, after "--"
	grace        time.Duration
	conflictExit int
}

func (a *app) lockRunCommand(lf *lockFlags) *cobra.Command {
	f := &lockRunFlags{lockFlags: lf}
	cmd := &cobra.Command{
		Use:   "run <name> -- command [args...]",
		Short: "Run a command while holding a lock, like flock(1)",
		Long: `Take the lock, run the command, release the lock; exit with the command's status.

Waits for the lock (up to --timeout; -n fails at once if it is held). While the
command runs the lock is renewed; if it is lost anyway (this process stalled or was
cut off longer than --ttl) the command's process group is killed and workq exits
non-zero. The command gets WORKQ_LOCK_NAME and WORKQ_LOCK_TOKEN, the fencing token.
SIGINT and SIGTERM are passed on to the command. On Linux, if workq itself is
killed the command and its children are killed too (SIGKILL, by a guard process
in the command's group), so nothing runs on unlocked.`,
		Example: `  workq lock run nightly-report -- ./report.sh
  workq lock run -n deploy -- make deploy || echo "someone else is deploying"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			before, argv, err := commandArgs(cmd, args, 1, "<name>")
			if err != nil {
				return err
			}
			f.name, f.argv = before[0], argv
			return a.execute(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	f.waitFlags.register(fl, kvlock.DefaultTTL, "lease: a holder that stops renewing loses the lock after this long")
	fl.IntVar(&f.conflictExit, "conflict-exit", 1, "exit status when the lock could not be taken")
	fl.DurationVar(&f.grace, "kill-grace", 5*time.Second, "after SIGTERM to the command's group, wait this long before SIGKILL")
	return cmd
}

func (f *lockRunFlags) validate() error {
	if err := f.waitFlags.validate(); err != nil {
		return err
	}
	switch {
	case f.conflictExit < 0 || f.conflictExit > 255:
		return fmt.Errorf("--conflict-exit %d: want 0 to 255", f.conflictExit)
	case f.grace < 0:
		return fmt.Errorf("--kill-grace %s: want ≥ 0", f.grace)
	}
	return nil
}

// run takes the lock, runs the command under it and releases it; it exits with
// the command's status, or --conflict-exit if the lock was not taken.
func (f *lockRunFlags) run(ctx context.Context, a *app) error {
	if err := proc.Find(f.argv[0]); err != nil {
		return err
	}
	c, l, err := a.locker(ctx, "lock run", f.lockFlags, true)
	if err != nil {
		return err
	}
	defer c.Close()
	lk, err := f.acquire(ctx, a, l, f.name)
	if err != nil {
		if errors.Is(err, kvlock.ErrLocked) {
			return exitCodeError{code: f.conflictExit, msg: lockedMessage(f.name, err).Error()}
		}
		return err
	}
	code, runErr := runUnderLock(ctx, lk, f.argv, f.grace)
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	relErr := lk.Release(rctx)
	cancel()
	switch {
	case runErr != nil:
		return runErr
	case relErr != nil && errors.Is(relErr, kvlock.ErrNotHeld):
		return exitCodeError{code: exitError, msg: fmt.Sprintf("lock %q was lost while the command ran (token %d)", f.name, lk.Token())}
	case code != 0:
		return exitCodeError{code: code}
	}
	return nil
}

// runUnderLock runs argv in its own process group, passing on SIGINT/SIGTERM (ctx's
// end) and killing it if the lock is lost. It returns the command's exit status.
// On Linux the command is killed if workq dies, so that it cannot run on after
// the lock has gone to someone else.
func runUnderLock(ctx context.Context, lk *kvlock.Lock, argv []string, grace time.Duration) (int, error) {
	cmd, err := proc.Command(argv)
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", argv[0], err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "WORKQ_LOCK_NAME="+lk.Name(), "WORKQ_LOCK_TOKEN="+strconv.FormatUint(lk.Token(), 10))
	exit, err := proc.Run(cmd, proc.Ends{Term: ctx.Done(), Stop: lk.Lost(), Grace: grace})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", argv[0], err)
	}
	if exit.Stopped {
		return 0, exitCodeError{code: exitError, msg: fmt.Sprintf("lock %q was lost (token %d); the command was killed", lk.Name(), lk.Token())}
	}
	status, _, ok := exit.Status()
	if !ok {
		return 0, fmt.Errorf("command: %w", exit.Err)
	}
	return status, nil
}
