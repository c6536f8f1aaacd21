package main

import (
	"context"
	"fmt"

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
		Args:    exactArgs(0, "no arguments"),
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
				t := newTable(a.stdout, "QUEUE", "JOBS", "PENDING", "RUNNING", "REDELIVERED", "DEAD", "ACK WAIT", "OLDEST")
				for _, q := range qs {
					t.row(q.Name, q.Jobs, q.Pending, q.Running, q.Redelivered, q.Dead, ackWait(q), ago(q.FirstJob))
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

	cmd.AddCommand(ls, info, purge, rm)
	return cmd
}

func ackWait(q admin.QueueInfo) string {
	if !q.Workers {
		return "- (no workers yet)"
	}
	return q.AckWait.String()
}

// withConn connects, runs fn with a bounded context and closes the connection.
func (a *app) withConn(ctx context.Context, what string, fn func(ctx context.Context, c *conn) error) error {
	c, err := a.connect(ctx, what, false)
	if err != nil {
		return err
	}
	defer c.Close()
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	return fn(octx, c)
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
