package main

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/producer"
)

func (a *app) jobCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Look up jobs",
	}
	var jsonOut bool
	get := &cobra.Command{
		Use:   "get <queue> <id>",
		Short: "Show a job's record: state, attempts, worker, timings, error, result",
		Long: `Show a job's record, the JSON document workq keeps per job in the queue's
bucket WORKQ_<queue>_JOBS. A job enqueued but not yet claimed shows as queued.
Records expire after the queue's record TTL (24h by default).`,
		Args:              exactArgs(2, "<queue> <id>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withConn(cmd.Context(), "job get", func(ctx context.Context, c *conn) error {
				// Look before provisioning: a lookup must not create a queue.
				if err := admin.Exists(ctx, c.js, args[0]); err != nil {
					return err
				}
				p, err := producer.New(ctx, c.js, args[0])
				if err != nil {
					return err
				}
				rec, err := p.Status(ctx, args[1])
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(a.stdout, rec)
				}
				t := newTable(a.stdout, "FIELD", "VALUE")
				t.row("id", rec.ID)
				t.row("queue", rec.Queue)
				t.row("kind", rec.Kind)
				t.row("state", string(rec.State))
				attempts := fmt.Sprint(rec.Attempt)
				if rec.MaxAttempts > 0 {
					attempts += fmt.Sprintf(" of %d", rec.MaxAttempts)
				}
				t.row("attempt", attempts)
				t.row("sequence", rec.Sequence)
				if !rec.Worker.IsZero() {
					t.row("worker", fmt.Sprintf("%s (host %s, pid %d)", rec.Worker.Name, rec.Worker.Host, rec.Worker.PID))
				}
				t.row("enqueued", rec.EnqueuedAt)
				t.row("started", rec.StartedAt)
				t.row("finished", rec.FinishedAt)
				if !rec.RetryAt.IsZero() {
					t.row("retry at", rec.RetryAt)
				}
				t.row("last error", rec.LastError)
				t.row("result", printable(rec.Result))
				if rec.Revision > 0 {
					t.row("revision", rec.Revision)
				}
				return t.flush()
			})
		},
	}
	get.Flags().BoolVar(&jsonOut, "json", false, "print the job record as JSON (result in base64)")
	cmd.AddCommand(get)
	return cmd
}

// printable shows bytes as text when they are text, else their size.
func printable(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if utf8.Valid(b) && !strings.ContainsRune(string(b), 0) {
		s := strings.TrimRight(string(b), "\n")
		if strings.Contains(s, "\n") {
			return truncate(strings.ReplaceAll(s, "\n", `\n`), 120)
		}
		return truncate(s, 120)
	}
	return fmt.Sprintf("<%d bytes of binary data>", len(b))
}
