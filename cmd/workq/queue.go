package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/admin"
)

func (a *app) queueCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List, inspect, purge and remove queues",
	}
	var jsonOut bool
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the queues on the server",
		Long: `List the queues on the server with their jobs: PENDING not yet delivered to a
worker; RUNNING delivered and not acknowledged (running, or held in a worker's
pull buffer); RETRYING failed and waiting out a retry backoff.

RUNNING and RETRYING are both jobs the workers' consumer counts as delivered and
not acknowledged. To tell them apart workq reads each such job and its record
(two requests per job, up to ` + fmt.Sprint(admin.RetryingScanLimit) + ` per queue; beyond that RETRYING is a
lower bound, shown with "≥").`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withConn(cmd.Context(), "queue ls", func(ctx context.Context, c *conn) error {
				qs, err := admin.ListQueues(ctx, c.js)
				if err != nil {
					return err
				}
				if jsonOut {
					if qs == nil {
						qs = []admin.QueueInfo{}
					}
					return writeJSON(a.stdout, qs)
				}
				if len(qs) == 0 {
					fmt.Fprintln(a.stdout, "no queues")
					return nil
				}
				t := newTable(a.stdout, "QUEUE", "JOBS", "PENDING", "RUNNING", "RETRYING", "REDELIVERED", "DEAD", "ACK WAIT", "OLDEST")
				for _, q := range qs {
					t.row(q.Name, q.Jobs, q.Pending, q.Running, retrying(q), q.Redelivered, q.Dead, ackWait(q), ago(q.FirstJob))
				}
				return t.flush()
			})
		},
	}
	ls.Flags().BoolVar(&jsonOut, "json", false, "print JSON")

	var infoJSON bool
	info := &cobra.Command{
		Use:               "info <queue>",
		Short:             "Show a queue's state",
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withConn(cmd.Context(), "queue info", func(ctx context.Context, c *conn) error {
				q, err := admin.Info(ctx, c.js, args[0])
				if err != nil {
					return err
				}
				if infoJSON {
					return writeJSON(a.stdout, q)
				}
				t := newTable(a.stdout, "FIELD", "VALUE")
				t.row("queue", q.Name)
				t.row("stream", q.Stream)
				t.row("jobs (queued, running, retrying)", q.Jobs)
				t.row("pending (not yet delivered)", q.Pending)
				t.row("running (delivered, not acked)", q.Running)
				t.row("retrying (waiting out a backoff)", retrying(*q))
				t.row("redelivered", q.Redelivered)
				t.row("dead letters", q.Dead)
				t.row("job records", q.Records)
				t.row("oldest job", ago(q.FirstJob))
				t.row("workers' ack wait", ackWait(*q))
				t.row("workers waiting", q.Waiting)
				t.row("dedup window", q.Duplicates.String())
				t.row("record TTL", q.RecordTTL.String())
				t.row("storage", fmt.Sprintf("%s, %d replica(s)", q.Storage, q.Replicas))
				t.row("created", q.Created)
				return t.flush()
			})
		},
	}
	info.Flags().BoolVar(&infoJSON, "json", false, "print JSON")

	var purgeYes bool
	purge := &cobra.Command{
		Use:               "purge <queue>",
		Short:             "Remove every waiting job from a queue (keeps dead letters and job records)",
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !purgeYes {
				return usageError{fmt.Errorf("purging queue %s deletes its jobs; add --yes to confirm", args[0])}
			}
			return a.withConn(cmd.Context(), "queue purge", func(ctx context.Context, c *conn) error {
				n, err := admin.Purge(ctx, c.js, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "purged %d job(s) from %s\n", n, args[0])
				return nil
			})
		},
	}
	purge.Flags().BoolVarP(&purgeYes, "yes", "y", false, "confirm")

	var rmYes bool
	rm := &cobra.Command{
		Use:               "rm <queue>",
		Aliases:           []string{"remove", "delete"},
		Short:             "Delete a queue with its jobs, dead letters and job records",
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !rmYes {
				return usageError{fmt.Errorf("removing queue %s deletes its jobs, dead letters and records; add --yes to confirm", args[0])}
			}
			return a.withConn(cmd.Context(), "queue rm", func(ctx context.Context, c *conn) error {
				if err := admin.Remove(ctx, c.js, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "removed queue %s\n", args[0])
				return nil
			})
		},
	}
	rm.Flags().BoolVarP(&rmYes, "yes", "y", false, "confirm")

	cmd.AddCommand(ls, info, purge, rm, a.queueSetCommand())
	return cmd
}

// retrying is a queue's retrying count, marked as a lower bound when partial.
func retrying(q admin.QueueInfo) string {
	if q.RetryingPartial {
		return fmt.Sprintf("≥%d", q.Retrying)
	}
	return fmt.Sprint(q.Retrying)
}

func (a *app) queueSetCommand() *cobra.Command {
	var (
		ackWait time.Duration
		force   bool
	)
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
			if !cmd.Flags().Changed("ack-wait") {
				return usageError{errors.New("queue set: nothing to set (--ack-wait)")}
			}
			if ackWait < 100*time.Millisecond {
				return usageError{fmt.Errorf("--ack-wait %s: want at least 100ms", ackWait)}
			}
			return a.withConn(cmd.Context(), "queue set", func(ctx context.Context, c *conn) error {
				q, err := admin.Info(ctx, c.js, args[0])
				if err != nil {
					return err
				}
				if q.Workers && q.Waiting > 0 {
					if !force {
						return fmt.Errorf("queue %s has workers pulling jobs (%d pull request(s) waiting), which keep heartbeating at the pace of --ack-wait %s until restarted: stop them first (or add --force)",
							q.Name, q.Waiting, time.Duration(q.AckWait))
					}
					fmt.Fprintf(a.stderr, "workq: warning: queue %s has workers pulling jobs (%d pull request(s)); they keep heartbeating for --ack-wait %s until restarted\n",
						q.Name, q.Waiting, time.Duration(q.AckWait))
				}
				old, err := admin.SetAckWait(ctx, c.js, args[0], ackWait)
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "queue %s: ack wait %s (was %s); start its workers with --ack-wait %s\n", q.Name, ackWait, old, ackWait)
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&ackWait, "ack-wait", 0, "the workers' AckWait: how long a job may go without a heartbeat before it moves to another worker")
	cmd.Flags().BoolVar(&force, "force", false, "set even while workers are pulling jobs")
	return cmd
}

func ackWait(q admin.QueueInfo) string {
	if !q.Workers {
		return "- (no workers yet)"
	}
	return q.AckWait.String()
}

// completeQueues offers the server's queue names for shell completion.
func (a *app) completeQueues(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	_ = a.withConn(cmd.Context(), "completion", func(ctx context.Context, c *conn) error {
		qs, err := admin.ListQueues(ctx, c.js)
		for _, q := range qs {
			names = append(names, q.Name)
		}
		return err
	})
	return names, cobra.ShellCompDirectiveNoFileComp
}
