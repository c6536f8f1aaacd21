package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
)

func (a *app) queuePurgeCommand() *cobra.Command {
	return a.confirmedCommand(&cobra.Command{
		Use:   "purge <queue>",
		Short: "Remove every waiting job from a queue (keeps dead letters and job records)",
	}, queuePurge())
}

// queuePurge is `workq queue purge`.
func queuePurge() *confirmedFlags {
	return &confirmedFlags{what: "queue purge", warning: "purging queue %s deletes its jobs",
		remove: func(ctx context.Context, adm *admin.Admin, q string) (string, error) {
			n, err := adm.PurgeQueue(ctx, q)
			return fmt.Sprintf("purged %d job(s) from %s", n, q), err
		}}
}

func (a *app) queueRmCommand() *cobra.Command {
	return a.confirmedCommand(&cobra.Command{
		Use:     "rm <queue>",
		Aliases: []string{"remove", "delete"},
		Short:   "Delete a queue with its jobs, dead letters and job records",
	}, queueRm())
}

// queueRm is `workq queue rm`.
func queueRm() *confirmedFlags {
	return &confirmedFlags{what: "queue rm", warning: "removing queue %s deletes its jobs, dead letters and records",
		remove: func(ctx context.Context, adm *admin.Admin, q string) (string, error) {
			return "removed queue " + q, adm.DeleteQueue(ctx, q)
		}}
}
