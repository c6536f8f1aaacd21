package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/workq/workq/kvlock"
)

// lockFlags are the flags of `workq lock` that its subcommands share.
type lockFlags struct {
	bucket string
}

func (a *app) lockCommand() *cobra.Command {
	lf := &lockFlags{}
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Distributed locks: run a command under a lock, acquire, release, inspect",
		Long: `Named locks shared by every process on the server (KV bucket WORKQ_LOCKS).
A lock is a lease renewed while its holder lives; a holder that dies or stalls
loses it after its TTL. Every grant has a fencing token that grows with each grant.`,
	}
	cmd.PersistentFlags().StringVar(&lf.bucket, "bucket", kvlock.DefaultBucket, "KV bucket holding the locks")
	cmd.AddCommand(a.lockRunCommand(lf), a.lockAcquireCommand(lf), a.lockReleaseCommand(lf),
		a.lockLsCommand(lf), a.lockInfoCommand(lf))
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

// existingLocker returns a Locker on the bucket if the bucket exists, else nil:
// looking at locks must not create their bucket.
func (lf *lockFlags) existingLocker(ctx context.Context, js jetstream.JetStream) (*kvlock.Locker, error) {
	ok, err := kvlock.BucketExists(ctx, js, lf.bucket)
	if err != nil || !ok {
		return nil, err
	}
	return kvlock.New(ctx, js, kvlock.Bucket(lf.bucket))
}

// waitFlags are how a lock is waited for, as lock run and lock acquire take them.
type waitFlags struct {
	ttl, timeout time.Duration
	nonblock     bool
	verbose      bool
}

// validate checks the lease and the wait.
func (w *waitFlags) validate() error {
	switch {
	case w.ttl < kvlock.MinTTL:
		return fmt.Errorf("--ttl %s: want at least %s", w.ttl, kvlock.MinTTL)
	case w.timeout < 0:
		return fmt.Errorf("--timeout %s: want ≥ 0 (0: as long as it takes)", w.timeout)
	}
	return nil
}

// acquire takes the lock, waiting up to --timeout (0: until ctx ends) or not at
// all with --nonblock. With --verbose, it says on stderr when the lock is busy (and
// who holds it) and when it was taken after waiting.
func (w *waitFlags) acquire(ctx context.Context, a *app, l *kvlock.Locker, name string, opts ...kvlock.AcquireOption) (*kvlock.Lock, error) {
	opts = append([]kvlock.AcquireOption{kvlock.TTL(w.ttl)}, opts...)
	if w.nonblock {
		return l.TryAcquire(ctx, name, opts...)
	}
	if w.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.timeout)
		defer cancel()
	}
	if !w.verbose {
		return l.Acquire(ctx, name, opts...)
	}
	lk, err := l.TryAcquire(ctx, name, opts...)
	if err == nil || !errors.Is(err, kvlock.ErrLocked) {
		return lk, err
	}
	a.say("%v; waiting", lockedMessage(name, err))
	start := time.Now()
	if lk, err = l.Acquire(ctx, name, opts...); err == nil {
		a.say("took lock %q after %s (token %d)", name, time.Since(start).Round(time.Millisecond), lk.Token())
	}
	return lk, err
}

// say prints a "workq: …" line on stderr.
func (a *app) say(format string, args ...any) {
	fmt.Fprintf(a.stderr, "workq: "+format+"\n", args...)
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

// register adds the flags of the wait, with the lease's default and help.
func (w *waitFlags) register(fl *pflag.FlagSet, ttl time.Duration, ttlHelp string) {
	fl.DurationVar(&w.ttl, "ttl", ttl, ttlHelp)
	fl.DurationVar(&w.timeout, "timeout", 0, "wait at most this long for the lock (default: as long as it takes)")
	fl.BoolVarP(&w.nonblock, "nonblock", "n", false, "fail at once if the lock is held")
	fl.BoolVarP(&w.verbose, "verbose", "v", false, "say on stderr when the lock is busy (and who holds it) and when it was taken")
}
