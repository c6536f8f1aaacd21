package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
)

// queueCreateFlags is `workq queue create`: the queue and what it is made with.
type queueCreateFlags struct {
	queue         string
	ackWait       time.Duration
	maxAckPending int
	replicas      int
	duplicates    time.Duration
	recordTTL     time.Duration
	changed       func(flag string) bool // given on the command line
}

func (a *app) queueCreateCommand() *cobra.Command {
	f := &queueCreateFlags{}
	cmd := &cobra.Command{
		Use:   "create <queue> [--ack-wait d] [--replicas n]",
		Short: "Create a queue with everything its producers and workers use",
		Long: `Create a queue: its jobs and dead-letter streams, its job-record and unique-key
buckets, and its workers' consumers (one per priority level). Producers and workers
create what they miss themselves when their user may; a deployment whose producers
and workers may not create streams or consumers (see 'workq perms') creates its
queues with this first. It is idempotent: what exists is checked and kept.

Workers must run with the same --ack-wait (workq work --ack-wait), or leave both at
the default.`,
		Example: `  workq queue create emails
  workq queue create reports --ack-wait 5m --replicas 3`,
		Args: exactArgs(1, "<queue>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue = args[0]
			f.changed = cmd.Flags().Changed
			return a.execute(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.ackWait, "ack-wait", admin.DefaultAckWait, "the workers' AckWait: how long a job may go without a heartbeat before it moves to another worker")
	fl.IntVar(&f.maxAckPending, "max-ack-pending", admin.DefaultMaxAckPending, "at most this many jobs held by the workers at once, across all of them")
	fl.IntVar(&f.replicas, "replicas", 1, "replicas of the queue's streams and buckets (3 on a cluster)")
	fl.DurationVar(&f.duplicates, "duplicates", 2*time.Minute, "window in which a job id enqueued again is dropped")
	fl.DurationVar(&f.recordTTL, "record-ttl", 24*time.Hour, "how long a job record lives after its last write")
	return cmd
}

func (f *queueCreateFlags) validate() error {
	switch {
	case f.ackWait < 100*time.Millisecond:
		return fmt.Errorf("--ack-wait %s: want at least 100ms", f.ackWait)
	case f.maxAckPending < 1:
		return fmt.Errorf("--max-ack-pending %d: want at least 1", f.maxAckPending)
	case f.replicas < 1 || f.replicas > 5:
		return fmt.Errorf("--replicas %d: want 1 to 5", f.replicas)
	case f.duplicates <= 0 || f.recordTTL <= 0:
		return fmt.Errorf("--duplicates %s, --record-ttl %s: want positive durations", f.duplicates, f.recordTTL)
	}
	return nil
}

func (f *queueCreateFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "queue create", func(ctx context.Context, c *conn) error {
		// Settings not given are left to CreateQueue: its defaults for a new queue,
		// what exists for an existing one (which a given setting must match).
		o := admin.QueueOptions{AckWait: f.ackWait, MaxAckPending: f.maxAckPending}
		if f.changed("replicas") {
			o.Replicas = f.replicas
		}
		if f.changed("duplicates") {
			o.Duplicates = f.duplicates
		}
		if f.changed("record-ttl") {
			o.RecordTTL = f.recordTTL
		}
		q, err := c.admin.CreateQueue(ctx, f.queue, o)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "queue %s is ready: ack wait %s, %d replica(s), %d job(s) waiting\n",
			q.Name, time.Duration(q.AckWait), q.Replicas, q.Jobs)
		return nil
	})
}
