package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/workq/workq/admin"
)

// queueSetFlags is `workq queue set`: the queue and the settings to change.
type queueSetFlags struct {
	queue      string
	ackWait    time.Duration
	ackWaitSet bool // --ack-wait given
	force      bool

	maxRunning    int
	maxRunningSet bool              // --max-running given
	kindLimits    map[string]string // --max-running-kind kind=n, n "0" removes
	rate          string            // --rate n/window, "0" or "off" removes
	rateSet       bool
}

func (a *app) queueSetCommand() *cobra.Command {
	f := &queueSetFlags{}
	cmd := &cobra.Command{
		Use:   "set <queue> [--max-running n] [--max-running-kind kind=n] [--rate n/window] [--ack-wait d]",
		Short: "Change a queue's settings in place: limits across all workers, the workers' ack wait",
		Long: `Set a queue's limits, which every worker of the queue obeys, in every process,
within 2 s: --max-running n jobs running at once (0: no limit), --max-running-kind
kind=n for the jobs of a kind (repeat it; n 0 removes the kind's limit), --rate
n/window job starts per sliding window (e.g. 100/1s, 5000/1m; the window at least
250ms; 0 or off: no limit). Flags not given keep their value. A worker waiting for a
slot or a permit keeps its job alive with heartbeats and does not poll. 'queue info'
shows the limits.

--ack-wait changes the workers' AckWait of a queue without deleting it: the workers'
consumer is updated in place and keeps its delivery state (jobs waiting, running
or retrying stay as they are).

Stop the queue's workers first, then start them with the new --ack-wait. Workers
check the AckWait when they start: one started with the old value is refused
with an error naming both. Running workers keep heartbeating at the pace of the
old value (a third of it): with a shorter new AckWait their running jobs would
time out and move to other workers while they run. So set refuses while workers
are pulling jobs (pull requests waiting on the consumer), unless --force; it
cannot see a worker whose handlers are all busy, so stopping the workers is on you.`,
		Example: `  workq queue set emails --max-running 5 --rate 100/1s
  workq queue set emails --max-running-kind send_sms=2
  workq queue set emails --max-running 0 --rate off
  workq queue set emails --ack-wait 1m`,
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue = args[0]
			f.ackWaitSet = cmd.Flags().Changed("ack-wait")
			f.maxRunningSet = cmd.Flags().Changed("max-running")
			f.rateSet = cmd.Flags().Changed("rate")
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().DurationVar(&f.ackWait, "ack-wait", 0, "the workers' AckWait: how long a job may go without a heartbeat before it moves to another worker")
	cmd.Flags().BoolVar(&f.force, "force", false, "set --ack-wait even while workers are pulling jobs")
	cmd.Flags().IntVar(&f.maxRunning, "max-running", 0, "at most this many of the queue's jobs running at once, across all workers (0: no limit)")
	cmd.Flags().StringToStringVar(&f.kindLimits, "max-running-kind", nil, "kind=n: at most n jobs of the kind running at once (n 0: no limit); repeatable")
	cmd.Flags().StringVar(&f.rate, "rate", "", "n/window: at most n job starts per sliding window, e.g. 100/1s (0 or off: no limit)")
	return cmd
}

func (f *queueSetFlags) validate() error {
	switch {
	case !f.ackWaitSet && !f.limitsSet():
		return errors.New("queue set: nothing to set (--max-running, --max-running-kind, --rate, --ack-wait)")
	case f.ackWaitSet && f.ackWait < 100*time.Millisecond:
		return fmt.Errorf("--ack-wait %s: want at least 100ms", f.ackWait)
	case f.maxRunning < 0:
		return fmt.Errorf("--max-running %d: want 0 (no limit) or more", f.maxRunning)
	}
	for k, v := range f.kindLimits {
		if n, err := strconv.Atoi(v); err != nil || n < 0 || k == "" {
			return fmt.Errorf("--max-running-kind %s=%s: want kind=n with n 0 (no limit) or more", k, v)
		}
	}
	if f.rateSet {
		if _, _, err := parseRate(f.rate); err != nil {
			return err
		}
	}
	return nil
}

func (f *queueSetFlags) limitsSet() bool {
	return f.maxRunningSet || len(f.kindLimits) > 0 || f.rateSet
}

// parseRate reads --rate: "n/window", or "0" or "off" for no limit.
func parseRate(s string) (int, time.Duration, error) {
	if s == "0" || s == "off" {
		return 0, 0, nil
	}
	ns, ws, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 1 {
		return 0, 0, fmt.Errorf("--rate %q: want n/window, such as 100/1s, or off", s)
	}
	w, err := time.ParseDuration(ws)
	if err != nil || w < 250*time.Millisecond {
		return 0, 0, fmt.Errorf("--rate %q: the window %q must be a duration of at least 250ms", s, ws)
	}
	return n, w, nil
}

// newLimits applies the flags given to the queue's current limits.
func (f *queueSetFlags) newLimits(cur admin.Limits) admin.Limits {
	l := cur
	l.MaxRunningByKind = maps.Clone(cur.MaxRunningByKind)
	if f.maxRunningSet {
		l.MaxRunning = f.maxRunning
	}
	for k, v := range f.kindLimits {
		n, _ := strconv.Atoi(v) // checked by validate
		if l.MaxRunningByKind == nil {
			l.MaxRunningByKind = map[string]int{}
		}
		if n == 0 {
			delete(l.MaxRunningByKind, k)
		} else {
			l.MaxRunningByKind[k] = n
		}
	}
	if f.rateSet {
		n, w, _ := parseRate(f.rate)
		l.Rate, l.RateWindow = n, admin.Duration(w)
	}
	return l
}

// run changes the limits, then the workers' ack wait, unless workers are pulling
// jobs (then only with --force, warning).
func (f *queueSetFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "queue set", func(ctx context.Context, c *conn) error {
		q, err := c.admin.Queue(ctx, f.queue)
		if err != nil {
			return err
		}
		if f.limitsSet() {
			l := f.newLimits(q.Limits)
			if _, err := c.admin.SetLimits(ctx, f.queue, l); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "queue %s: limits %s (were %s)\n", q.Name, describeLimits(l), describeLimits(q.Limits))
		}
		if !f.ackWaitSet {
			return nil
		}
		if q.Workers && q.Waiting > 0 {
			if !f.force {
				return fmt.Errorf("queue %s has workers pulling jobs (%d pull request(s) waiting), which keep heartbeating at the pace of --ack-wait %s until restarted: stop them first (or add --force)",
					q.Name, q.Waiting, time.Duration(q.AckWait))
			}
			fmt.Fprintf(a.stderr, "workq: warning: queue %s has workers pulling jobs (%d pull request(s)); they keep heartbeating for --ack-wait %s until restarted\n",
				q.Name, q.Waiting, time.Duration(q.AckWait))
		}
		old, err := c.admin.SetAckWait(ctx, f.queue, f.ackWait)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "queue %s: ack wait %s (was %s); start its workers with --ack-wait %s\n", q.Name, f.ackWait, old, f.ackWait)
		return nil
	})
}

// describeLimits says a queue's limits in a line.
func describeLimits(l admin.Limits) string {
	var parts []string
	if l.MaxRunning > 0 {
		parts = append(parts, fmt.Sprintf("max running %d", l.MaxRunning))
	}
	for _, k := range slices.Sorted(maps.Keys(l.MaxRunningByKind)) {
		parts = append(parts, fmt.Sprintf("max running %d of kind %s", l.MaxRunningByKind[k], k))
	}
	if l.Rate > 0 {
		parts = append(parts, fmt.Sprintf("rate %d/%s", l.Rate, l.RateWindow))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
