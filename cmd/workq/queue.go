package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
)

func (a *app) queueCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List, inspect, pause, resume, purge and remove queues",
	}
	cmd.AddCommand(a.queueCreateCommand(), a.queueLsCommand(), a.queueInfoCommand(), a.queuePauseCommand(), a.queueResumeCommand(),
		a.queuePurgeCommand(), a.queueRmCommand(), a.queueSetCommand())
	return cmd
}

// queueLsFlags is `workq queue ls`.
type queueLsFlags struct {
	jsonOut bool
}

func (a *app) queueLsCommand() *cobra.Command {
	f := &queueLsFlags{}
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the queues on the server",
		Long: `List the queues on the server with their jobs: PENDING not yet delivered to a
worker; RUNNING delivered and not acknowledged (running, or held in a worker's
pull buffer); RETRYING failed and waiting out a retry backoff.

RUNNING and RETRYING are both jobs the workers' consumer counts as delivered and
not acknowledged. To tell them apart workq reads each such job and its record
(two requests per job, up to ` + fmt.Sprint(admin.RetryingScanLimit) + ` per queue; beyond that RETRYING is a
lower bound, shown with "≥"). STATE is "paused" while the queue is paused (workq
queue pause), else "active".`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print JSON")
	return cmd
}

func (f *queueLsFlags) validate() error { return nil }

// run lists the queues with their counts of jobs.
func (f *queueLsFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "queue ls", func(ctx context.Context, c *conn) error {
		qs, err := c.admin.Queues(ctx)
		if err != nil {
			return err
		}
		if f.jsonOut {
			if qs == nil {
				qs = []admin.QueueInfo{}
			}
			return writeJSON(a.stdout, qs)
		}
		if len(qs) == 0 {
			fmt.Fprintln(a.stdout, "no queues")
			return nil
		}
		t := newTable(a.stdout, "QUEUE", "JOBS", "PENDING", "RUNNING", "RETRYING", "REDELIVERED", "DEAD", "SCHEDULED", "SCHEDULES", "ACK WAIT", "OLDEST", "STATE")
		for _, q := range qs {
			t.row(q.Name, q.Jobs, q.Pending, q.Running, retrying(q), q.Redelivered, q.Dead, q.Scheduled, q.Schedules, ackWait(q), ago(q.FirstJob), queueState(q))
		}
		return t.flush()
	})
}

// queueInfoFlags is `workq queue info`: the queue and the flags.
type queueInfoFlags struct {
	queue   string
	jsonOut bool
}

func (a *app) queueInfoCommand() *cobra.Command {
	f := &queueInfoFlags{}
	cmd := &cobra.Command{
		Use:               "info <queue>",
		Short:             "Show a queue's state",
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue = args[0]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print JSON")
	return cmd
}

func (f *queueInfoFlags) validate() error { return nil }

// run shows the queue's counts and settings.
func (f *queueInfoFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "queue info", func(ctx context.Context, c *conn) error {
		q, err := c.admin.Queue(ctx, f.queue)
		if err != nil {
			return err
		}
		if f.jsonOut {
			return writeJSON(a.stdout, q)
		}
		return writeFields(a.stdout, []field{
			{"queue", q.Name},
			{"stream", q.Stream},
			{"state", queueState(*q)},
			{"jobs (queued, running, retrying)", q.Jobs},
			{"pending (not yet delivered)", q.Pending},
			{"running (delivered, not acked)", q.Running},
			{"retrying (waiting out a backoff)", retrying(*q)},
			{"redelivered", q.Redelivered},
			{"dead letters", q.Dead},
			{"scheduled (delayed jobs waiting)", q.Scheduled},
			{"periodic schedules", q.Schedules},
			{"job records", q.Records},
			{"oldest job", ago(q.FirstJob)},
			{"waiting in sequences", q.SequenceWaiting},
			{"sequence keys with one waiting", q.SequenceKeys},
			{"oldest waiting in a sequence", ago(q.SequenceOldest)},
			{"limits", describeLimits(q.Limits)},
			{"workers' ack wait", ackWait(*q)},
			{"workers waiting", q.Waiting},
			{"dedup window", q.Duplicates.String()},
			{"record TTL", q.RecordTTL.String()},
			{"storage", fmt.Sprintf("%s, %d replica(s)", q.Storage, q.Replicas)},
			{"created", q.Created},
		})
	})
}

// retrying is a queue's retrying count, marked as a lower bound when partial.
func retrying(q admin.QueueInfo) string {
	if q.RetryingPartial {
		return fmt.Sprintf("≥%d", q.Retrying)
	}
	return fmt.Sprint(q.Retrying)
}

// queueState says whether the queue is paused.
func queueState(q admin.QueueInfo) string {
	if q.Paused {
		return "paused"
	}
	return "active"
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
		qs, err := c.admin.Queues(ctx)
		for _, q := range qs {
			names = append(names, q.Name)
		}
		return err
	})
	return names, cobra.ShellCompDirectiveNoFileComp
}
