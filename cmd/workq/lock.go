package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/kvlock"
)

type lockFlags struct {
	bucket string
}

func (a *app) lockCommand() *cobra.Command {
	var lf lockFlags
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Distributed locks: run a command under a lock, acquire, release, inspect",
		Long: `Named locks shared by every process on the server (KV bucket WORKQ_LOCKS).
A lock is a lease renewed while its holder lives; a holder that dies or stalls
loses it after its TTL. Every grant has a fencing token that grows with each grant.`,
	}
	cmd.PersistentFlags().StringVar(&lf.bucket, "bucket", kvlock.DefaultBucket, "KV bucket holding the locks")
	cmd.AddCommand(a.lockRunCommand(&lf), a.lockAcquireCommand(&lf), a.lockReleaseCommand(&lf),
		a.lockLsCommand(&lf), a.lockInfoCommand(&lf))
	return cmd
}

// locker connects and returns a Locker on the bucket.
func (a *app) locker(ctx context.Context, what string, lf *lockFlags, longLived bool) (*conn, *kvlock.Locker, error) {
	c, err := a.connect(ctx, what, longLived)
	if err != nil {
		return nil, nil, err
	}
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	l, err := kvlock.New(octx, c.js, kvlock.Bucket(lf.bucket), kvlock.Owner("workq "+what))
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, l, nil
}

// acquireWith takes the lock, waiting up to timeout (0: until ctx ends) or not at
// all with nonblock. If say is not nil, it is told when the lock is busy (and who
// holds it) and when it was taken after waiting.
func acquireWith(ctx context.Context, l *kvlock.Locker, name string, nonblock bool, timeout time.Duration, say func(string, ...any), opts ...kvlock.AcquireOption) (*kvlock.Lock, error) {
	if nonblock {
		return l.TryAcquire(ctx, name, opts...)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if say == nil {
		return l.Acquire(ctx, name, opts...)
	}
	lk, err := l.TryAcquire(ctx, name, opts...)
	if err == nil || !errors.Is(err, kvlock.ErrLocked) {
		return lk, err
	}
	say("%v; waiting", lockedMessage(name, err))
	start := time.Now()
	if lk, err = l.Acquire(ctx, name, opts...); err == nil {
		say("took lock %q after %s (token %d)", name, time.Since(start).Round(time.Millisecond), lk.Token())
	}
	return lk, err
}

// sayer prints "workq: …" lines on stderr when verbose, else is nil.
func (a *app) sayer(verbose bool) func(string, ...any) {
	if !verbose {
		return nil
	}
	return func(format string, args ...any) {
		fmt.Fprintf(a.stderr, "workq: "+format+"\n", args...)
	}
}

func lockedMessage(name string, err error) error {
	var le *kvlock.LockedError
	if errors.As(err, &le) && len(le.Holders) > 0 {
		h := le.Holders[0]
		return fmt.Errorf("lock %q is held by %s (host %s, pid %d, since %s)", name, h.Owner, h.Host, h.PID, h.Acquired.Local().Format(time.TimeOnly))
	}
	if errors.Is(err, kvlock.ErrLocked) {
		return fmt.Errorf("lock %q is held by another process", name)
	}
	return err
}

func (a *app) lockRunCommand(lf *lockFlags) *cobra.Command {
	var (
		ttl, timeout, grace time.Duration
		nonblock, verbose   bool
		conflictExit        int
	)
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
			if _, err := exec.LookPath(argv[0]); err != nil {
				return fmt.Errorf("command %q: %v", argv[0], errors.Unwrap(err))
			}
			name := before[0]
			ctx := cmd.Context()
			c, l, err := a.locker(ctx, "lock run", lf, true)
			if err != nil {
				return err
			}
			defer c.Close()
			lk, err := acquireWith(ctx, l, name, nonblock, timeout, a.sayer(verbose), kvlock.TTL(ttl))
			if err != nil {
				if errors.Is(err, kvlock.ErrLocked) {
					return exitCodeError{code: conflictExit, msg: lockedMessage(name, err).Error()}
				}
				return err
			}
			code, runErr := runUnderLock(ctx, lk, argv, grace)
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			relErr := lk.Release(rctx)
			cancel()
			switch {
			case runErr != nil:
				return runErr
			case relErr != nil && errors.Is(relErr, kvlock.ErrNotHeld):
				return exitCodeError{code: exitError, msg: fmt.Sprintf("lock %q was lost while the command ran (token %d)", name, lk.Token())}
			case code != 0:
				return exitCodeError{code: code}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&ttl, "ttl", kvlock.DefaultTTL, "lease: a holder that stops renewing loses the lock after this long")
	fl.DurationVar(&timeout, "timeout", 0, "wait at most this long for the lock (default: as long as it takes)")
	fl.BoolVarP(&nonblock, "nonblock", "n", false, "fail at once if the lock is held")
	fl.IntVar(&conflictExit, "conflict-exit", 1, "exit status when the lock could not be taken")
	fl.DurationVar(&grace, "kill-grace", 5*time.Second, "after SIGTERM to the command's group, wait this long before SIGKILL")
	fl.BoolVarP(&verbose, "verbose", "v", false, "say on stderr when the lock is busy (and who holds it) and when it was taken")
	return cmd
}

// runUnderLock runs argv in its own process group, passing on SIGINT/SIGTERM (ctx's
// end) and killing it if the lock is lost. It returns the command's exit status.
// On Linux the command is killed if workq dies, so that it cannot run on after
// the lock has gone to someone else.
func runUnderLock(ctx context.Context, lk *kvlock.Lock, argv []string, grace time.Duration) (int, error) {
	unpin := pinThread() // until the command is waited for: see command
	defer unpin()
	cmd, err := command(argv)
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", argv[0], err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "WORKQ_LOCK_NAME="+lk.Name(), "WORKQ_LOCK_TOKEN="+strconv.FormatUint(lk.Token(), 10))
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", argv[0], err)
	}
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	lost := make(chan struct{})
	go func() {
		select {
		case <-exited:
			return
		case <-ctx.Done():
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			return // the user asked to stop: the command decides how
		case <-lk.Lost():
		}
		close(lost)
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	werr := cmd.Wait()
	close(exited)
	select {
	case <-lost:
		return 0, exitCodeError{code: exitError, msg: fmt.Sprintf("lock %q was lost (token %d); the command was killed", lk.Name(), lk.Token())}
	default:
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	if werr != nil {
		return 0, fmt.Errorf("command: %w", werr)
	}
	return 0, nil
}

func (a *app) lockAcquireCommand(lf *lockFlags) *cobra.Command {
	var (
		ttl, timeout time.Duration
		nonblock     bool
		jsonOut      bool
		verbose      bool
	)
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
			ctx := cmd.Context()
			c, l, err := a.locker(ctx, "lock acquire", lf, false)
			if err != nil {
				return err
			}
			defer c.Close()
			lk, err := acquireWith(ctx, l, args[0], nonblock, timeout, a.sayer(verbose), kvlock.TTL(ttl), kvlock.NoRenew())
			if err != nil {
				return lockedMessage(args[0], err)
			}
			quiet, _ := cmd.Flags().GetBool("quiet")
			switch {
			case jsonOut:
				return writeJSON(a.stdout, map[string]any{"name": lk.Name(), "token": lk.Token(), "ttl": lk.TTL().String(),
					"expires": time.Now().Add(lk.TTL()).UTC()})
			case quiet:
				fmt.Fprintln(a.stdout, lk.Token())
			default:
				fmt.Fprintf(a.stdout, "acquired lock %q for %s: token %d\n", lk.Name(), lk.TTL(), lk.Token())
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&ttl, "ttl", 30*time.Second, "how long the lock is held unless released")
	fl.DurationVar(&timeout, "timeout", 0, "wait at most this long for the lock (default: as long as it takes)")
	fl.BoolVarP(&nonblock, "nonblock", "n", false, "fail at once if the lock is held")
	fl.BoolVar(&jsonOut, "json", false, "print JSON")
	fl.BoolP("quiet", "q", false, "print only the token")
	fl.BoolVarP(&verbose, "verbose", "v", false, "say on stderr when the lock is busy (and who holds it) and when it was taken")
	return cmd
}

func (a *app) lockReleaseCommand(lf *lockFlags) *cobra.Command {
	var token uint64
	var force bool
	cmd := &cobra.Command{
		Use:   "release <name>",
		Short: "Release a lock taken with 'lock acquire' (by its token), or any holder's with --force",
		Long: `Release the lock if it is still the grant with --token (like RELEASE_LOCK, it
fails if the lock is not held as that grant). --force releases it whoever holds
it; a live holder learns it lost the lock on its next renewal.`,
		Args: exactArgs(1, "<name>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (token == 0) == !force {
				return usageError{errors.New("give --token (from 'workq lock acquire') or --force")}
			}
			ctx := cmd.Context()
			c, l, err := a.locker(ctx, "lock release", lf, false)
			if err != nil {
				return err
			}
			defer c.Close()
			octx, cancel := a.opCtx(ctx)
			defer cancel()
			h, err := l.ForceRelease(octx, args[0], token)
			if err != nil {
				if errors.Is(err, kvlock.ErrNotHeld) {
					return fmt.Errorf("lock %q was not released: %v", args[0], strip(errors.Unwrap(err)))
				}
				return err
			}
			fmt.Fprintf(a.stdout, "released lock %q (held by %s, pid %d)\n", args[0], h.Owner, h.PID)
			return nil
		},
	}
	cmd.Flags().Uint64Var(&token, "token", 0, "the token 'workq lock acquire' printed")
	cmd.Flags().BoolVar(&force, "force", false, "release whoever holds it")
	return cmd
}

// lockView is a lock as --json shows it.
type lockView struct {
	Name     string    `json:"name"`
	Kind     string    `json:"kind"`
	Slot     *int      `json:"slot,omitempty"`
	Held     bool      `json:"held"`
	Owner    string    `json:"owner,omitempty"`
	Host     string    `json:"host,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Acquired time.Time `json:"acquired,omitzero"`
	Lease    string    `json:"lease,omitempty"`
	Revision uint64    `json:"revision,omitempty"`
}

func viewOf(name, kind string, slot int, h *kvlock.Holder) lockView {
	v := lockView{Name: name, Kind: kind}
	if slot >= 0 {
		v.Slot = &slot
	}
	if h != nil {
		v.Held, v.Owner, v.Host, v.PID, v.Acquired, v.Lease, v.Revision = true, h.Owner, h.Host, h.PID, h.Acquired, h.Lease.String(), h.Revision
	}
	return v
}

func (a *app) lockLsCommand(lf *lockFlags) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List held locks and semaphore slots",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withConn(cmd.Context(), "lock ls", func(ctx context.Context, c *conn) error {
				views := []lockView{}
				ok, err := kvlock.BucketExists(ctx, c.js, lf.bucket)
				if err != nil {
					return err
				}
				if ok {
					l, err := kvlock.New(ctx, c.js, kvlock.Bucket(lf.bucket))
					if err != nil {
						return err
					}
					es, err := l.List(ctx)
					if err != nil {
						return err
					}
					for _, e := range es {
						views = append(views, viewOf(e.Name, e.Kind, e.Slot, &e.Holder))
					}
				}
				if jsonOut {
					return writeJSON(a.stdout, views)
				}
				if len(views) == 0 {
					fmt.Fprintln(a.stdout, "no locks held")
					return nil
				}
				t := newTable(a.stdout, "NAME", "KIND", "OWNER", "HOST", "PID", "SINCE", "LEASE", "REVISION")
				for _, v := range views {
					kind := v.Kind
					if v.Slot != nil {
						kind = fmt.Sprintf("semaphore slot %d", *v.Slot)
					}
					t.row(v.Name, kind, v.Owner, v.Host, v.PID, ago(v.Acquired), v.Lease, v.Revision)
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func (a *app) lockInfoCommand(lf *lockFlags) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "info <name>",
		Short: "Show who holds a lock",
		Args:  exactArgs(1, "<name>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withConn(cmd.Context(), "lock info", func(ctx context.Context, c *conn) error {
				var h *kvlock.Holder
				ok, err := kvlock.BucketExists(ctx, c.js, lf.bucket)
				if err != nil {
					return err
				}
				if ok {
					l, err := kvlock.New(ctx, c.js, kvlock.Bucket(lf.bucket))
					if err != nil {
						return err
					}
					if h, err = l.Inspect(ctx, args[0]); err != nil {
						return err
					}
				}
				v := viewOf(args[0], "lock", -1, h)
				if jsonOut {
					return writeJSON(a.stdout, v)
				}
				if !v.Held {
					fmt.Fprintf(a.stdout, "lock %q is free\n", args[0])
					return nil
				}
				t := newTable(a.stdout, "FIELD", "VALUE")
				t.row("lock", v.Name)
				t.row("owner", v.Owner)
				t.row("host", v.Host)
				t.row("pid", v.PID)
				t.row("acquired", v.Acquired)
				t.row("lease", v.Lease)
				t.row("revision", v.Revision)
				return t.flush()
			})
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}
