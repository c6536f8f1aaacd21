package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// queueSetFlags is `workq queue set`: the queue and the settings to change.
type queueSetFlags struct {
	queue      string
	ackWait    time.Duration
	ackWaitSet bool // --ack-wait given
	force      bool
}

func (a *app) queueSetCommand() *cobra.Command {
	f := &queueSetFlags{}
	cmd := &cobra.Command{
		Use:   "set <queue> --ack-wait d",
		Short: "Change a queue's settings in place (the workers' ack wait)",
		Long: `Change the workers' AckWait of a queue without deleting it: the workers'
consumer is updated in place and keeps its delivery state (jobs waiting, running
or retrying stay as they are).

Stop the queue's workers first, then start them with the new --ack-wait. Workers
check the AckWait when they start: one started with the old value is refused
with an error naming both. Running workers keep heartbeating at the pace of the
old value (a third of it): with a shorter new AckWait their running jobs would
time out and move to other workers while they run. So set refuses while workers
are pulling jobs (pull requests waiting on the consumer), unless --force; it
cannot see a worker whose handlers are all busy, so stopping the workers is on you.`,
		Example:           `  workq queue set emails --ack-wait 1m`,
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue = args[0]
			f.ackWaitSet = cmd.Flags().Changed("ack-wait")
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().DurationVar(&f.ackWait, "ack-wait", 0, "the workers' AckWait: how long a job may go without a heartbeat before it moves to another worker")
	cmd.Flags().BoolVar(&f.force, "force", false, "set even while workers are pulling jobs")
	return cmd
}

func (f *queueSetFlags) validate() error {
	switch {
	case !f.ackWaitSet:
		return errors.New("queue set: nothing to set (--ack-wait)")
	case f.ackWait < 100*time.Millisecond:
		return fmt.Errorf("--ack-wait %s: want at least 100ms", f.ackWait)
	}
	return nil
}

// run changes the workers' ack wait, unless workers are pulling jobs (then only
// with --force, warning).
func (f *queueSetFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "queue set", func(ctx context.Context, c *conn) error {
		q, err := c.admin.Queue(ctx, f.queue)
		if err != nil {
			return err
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
