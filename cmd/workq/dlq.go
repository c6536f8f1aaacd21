package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/admin"
)

func (a *app) dlqCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Browse, requeue and purge a queue's dead letters",
		Long: `Dead letters are jobs that failed for good (a permanent failure, or attempts
exhausted). They stay in the stream WORKQ_<queue>_DEAD until requeued or purged.`,
	}

	var lsJSON bool
	var limit int
	ls := &cobra.Command{
		Use:               "ls <queue>",
		Aliases:           []string{"list"},
		Short:             "List dead letters, oldest first",
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withConn(cmd.Context(), "dlq ls", func(ctx context.Context, c *conn) error {
				ds, err := admin.DeadLetters(ctx, c.js, args[0], limit, false)
				if err != nil {
					return err
				}
				if lsJSON {
					if ds == nil {
						ds = []admin.DeadLetter{}
					}
					return writeJSON(a.stdout, ds)
				}
				if len(ds) == 0 {
					fmt.Fprintf(a.stdout, "no dead letters in %s\n", args[0])
					return nil
				}
				t := newTable(a.stdout, "SEQ", "JOB", "KIND", "ATTEMPTS", "DIED", "SIZE", "ERROR")
				for _, d := range ds {
					t.row(d.Sequence, d.JobID, d.Kind, d.Attempts, ago(d.DeadAt), d.Size, truncate(d.Error, 80))
				}
				return t.flush()
			})
		},
	}
	ls.Flags().BoolVar(&lsJSON, "json", false, "print JSON")
	ls.Flags().IntVarP(&limit, "limit", "n", 1000, "list at most this many (0: all)")

	var showJSON, payloadOnly bool
	show := &cobra.Command{
		Use:               "show <queue> <job-id|seq>",
		Short:             "Show one dead letter: why it died, its headers and payload",
		Args:              exactArgs(2, "<queue> <job-id|seq>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withConn(cmd.Context(), "dlq show", func(ctx context.Context, c *conn) error {
				ds, err := admin.DeadLetters(ctx, c.js, args[0], 0, true)
				if err != nil {
					return err
				}
				sel := parseSelection(args[1:], nil)
				var found []admin.DeadLetter
				for _, d := range ds {
					if matches(sel, d) {
						found = append(found, d)
					}
				}
				if len(found) == 0 {
					return fmt.Errorf("queue %s: %v: %s", args[0], admin.ErrNoDeadLetter, args[1])
				}
				d := found[len(found)-1] // the latest death of that job
				switch {
				case payloadOnly:
					_, err := a.stdout.Write(d.Payload)
					return err
				case showJSON:
					return writeJSON(a.stdout, d)
				}
				t := newTable(a.stdout, "FIELD", "VALUE")
				t.row("dead letter", d.Sequence)
				t.row("job", d.JobID)
				t.row("kind", d.Kind)
				t.row("attempts", d.Attempts)
				t.row("died", d.DeadAt)
				t.row("error", d.Error)
				t.row("original subject", d.Subject)
				t.row("original sequence", d.OrigSeq)
				keys := make([]string, 0, len(d.Header))
				for k := range d.Header {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					t.row("header "+k, strings.Join(d.Header[k], ", "))
				}
				t.row("payload", printable(d.Payload))
				if len(found) > 1 {
					t.row("note", fmt.Sprintf("%d dead letters for this job; showing the latest", len(found)))
				}
				return t.flush()
			})
		},
	}
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON (payload in base64)")
	show.Flags().BoolVar(&payloadOnly, "payload", false, "print only the raw payload")

	var all, reqJSON bool
	var seqs []uint
	requeue := &cobra.Command{
		Use:   "requeue <queue> [job-id...]",
		Short: "Put dead letters back on the queue: some by job id or --seq, or --all",
		Long: `Put dead letters back on their queue as new runs of their jobs, with their
original payload and headers. Each is deleted from the dead letters only after
the server has stored it on the queue, so an interrupted requeue loses nothing,
and running it again finishes it without duplicating what was already requeued.`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := args[1:]
			if all == (len(ids)+len(seqs) > 0) {
				return usageError{errors.New("name dead letters by job id or --seq, or give --all (not both)")}
			}
			sel := admin.Selection{All: all, IDs: ids}
			for _, s := range seqs {
				sel.Sequences = append(sel.Sequences, uint64(s))
			}
			return a.withConn(cmd.Context(), "dlq requeue", func(ctx context.Context, c *conn) error {
				done, err := admin.Requeue(ctx, c.js, args[0], sel, func(r admin.Requeued) {
					if reqJSON {
						_ = json.NewEncoder(a.stdout).Encode(r)
					} else {
						fmt.Fprintf(a.stdout, "requeued %s (dead letter #%d, now sequence %d)\n", r.JobID, r.DeadSeq, r.Sequence)
					}
				})
				if err != nil {
					return err
				}
				if !reqJSON && len(done) == 0 {
					fmt.Fprintf(a.stdout, "no dead letters in %s\n", args[0])
				}
				return nil
			})
		},
	}
	requeue.Flags().BoolVar(&all, "all", false, "requeue every dead letter")
	requeue.Flags().UintSliceVar(&seqs, "seq", nil, "dead-letter sequence(s) to requeue")
	requeue.Flags().BoolVar(&reqJSON, "json", false, "print each requeued job as a JSON line")

	var purgeYes bool
	purge := &cobra.Command{
		Use:               "purge <queue>",
		Short:             "Delete every dead letter of a queue",
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !purgeYes {
				return usageError{fmt.Errorf("purging the dead letters of %s deletes them for good; add --yes to confirm", args[0])}
			}
			return a.withConn(cmd.Context(), "dlq purge", func(ctx context.Context, c *conn) error {
				n, err := admin.PurgeDead(ctx, c.js, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "purged %d dead letter(s) from %s\n", n, args[0])
				return nil
			})
		},
	}
	purge.Flags().BoolVarP(&purgeYes, "yes", "y", false, "confirm")

	cmd.AddCommand(ls, show, requeue, purge)
	return cmd
}

// parseSelection reads "job-id" or "#seq"/"seq" arguments for dlq show.
func parseSelection(args []string, seqs []uint64) admin.Selection {
	sel := admin.Selection{Sequences: seqs}
	for _, a := range args {
		if n, err := strconv.ParseUint(strings.TrimPrefix(a, "#"), 10, 64); err == nil {
			sel.Sequences = append(sel.Sequences, n)
		}
		sel.IDs = append(sel.IDs, a)
	}
	return sel
}

func matches(sel admin.Selection, d admin.DeadLetter) bool {
	for _, id := range sel.IDs {
		if d.JobID == id {
			return true
		}
	}
	for _, s := range sel.Sequences {
		if d.Sequence == s {
			return true
		}
	}
	return false
}
