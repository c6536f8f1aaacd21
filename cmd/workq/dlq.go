package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
)

func (a *app) dlqCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Browse, requeue and purge a queue's dead letters",
		Long: `Dead letters are jobs that failed for good (a permanent failure, or attempts
exhausted). They stay in the stream WORKQ_<queue>_DEAD until requeued or purged.`,
	}
	cmd.AddCommand(a.dlqLsCommand(), a.dlqShowCommand(), a.dlqRequeueCommand(), a.dlqPurgeCommand())
	return cmd
}

// dlqLsFlags is `workq dlq ls`: the queue and the flags.
type dlqLsFlags struct {
	queue   string
	jsonOut bool
	limit   int
}

func (a *app) dlqLsCommand() *cobra.Command {
	f := &dlqLsFlags{}
	cmd := &cobra.Command{
		Use:               "ls <queue>",
		Aliases:           []string{"list"},
		Short:             "List dead letters, oldest first",
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue = args[0]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print JSON")
	cmd.Flags().IntVarP(&f.limit, "limit", "n", 1000, "list at most this many (0: all)")
	return cmd
}

func (f *dlqLsFlags) validate() error { return nil }

// run lists the queue's dead letters, oldest first.
func (f *dlqLsFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "dlq ls", func(ctx context.Context, c *conn) error {
		ds, err := c.admin.DeadLetters(ctx, f.queue, f.limit, false)
		if err != nil {
			return err
		}
		if f.jsonOut {
			if ds == nil {
				ds = []admin.DeadLetter{}
			}
			return writeJSON(a.stdout, ds)
		}
		if len(ds) == 0 {
			fmt.Fprintf(a.stdout, "no dead letters in %s\n", f.queue)
			return nil
		}
		t := newTable(a.stdout, "SEQ", "JOB", "KIND", "ATTEMPTS", "DIED", "SIZE", "ERROR")
		for _, d := range ds {
			t.row(d.Sequence, d.JobID, d.Kind, d.Attempts, ago(d.DeadAt), d.Size, truncate(d.Error, 80))
		}
		return t.flush()
	})
}

func (a *app) dlqPurgeCommand() *cobra.Command {
	return a.confirmedCommand(&cobra.Command{
		Use:   "purge <queue>",
		Short: "Delete every dead letter of a queue",
	}, dlqPurge())
}

// dlqPurge is `workq dlq purge`.
func dlqPurge() *confirmedFlags {
	return &confirmedFlags{what: "dlq purge", warning: "purging the dead letters of %s deletes them for good",
		remove: func(ctx context.Context, adm *admin.Admin, q string) (string, error) {
			n, err := adm.PurgeDead(ctx, q)
			return fmt.Sprintf("purged %d dead letter(s) from %s", n, q), err
		}}
}
