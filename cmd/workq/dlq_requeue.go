package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
)

// dlqRequeueFlags is `workq dlq requeue`: the queue, the dead letters by job id
// or sequence, or all of them.
type dlqRequeueFlags struct {
	queue   string
	ids     []string
	seqs    []uint
	all     bool
	kind    string
	jsonOut bool
}

func (a *app) dlqRequeueCommand() *cobra.Command {
	f := &dlqRequeueFlags{}
	cmd := &cobra.Command{
		Use:   "requeue <queue> [job-id...]",
		Short: "Put dead letters back on the queue: some by job id or --seq, or --all",
		Long: `Put dead letters back on their queue as new runs of their jobs, with their
original payload and headers. Each is deleted from the dead letters only after
the server has stored it on the queue, so an interrupted requeue loses nothing,
and running it again finishes it without duplicating what was already requeued.`,
		Args:              rangeArgs(1, math.MaxInt, "<queue> [job-id...]"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.ids = args[0], args[1:]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.all, "all", false, "requeue every dead letter")
	cmd.Flags().UintSliceVar(&f.seqs, "seq", nil, "dead-letter sequence(s) to requeue")
	cmd.Flags().StringVar(&f.kind, "kind", "", "give the requeued jobs this kind (for jobs enqueued without one, or under one no handler takes)")
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print each requeued job as a JSON line")
	return cmd
}

func (f *dlqRequeueFlags) validate() error {
	if f.all == (len(f.ids)+len(f.seqs) > 0) {
		return errors.New("name dead letters by job id or --seq, or give --all (not both)")
	}
	return nil
}

// run requeues the dead letters named, saying so for each.
func (f *dlqRequeueFlags) run(ctx context.Context, a *app) error {
	sel := admin.Selection{All: f.all, IDs: f.ids}
	for _, s := range f.seqs {
		sel.Sequences = append(sel.Sequences, uint64(s))
	}
	return a.withConn(ctx, "dlq requeue", func(ctx context.Context, c *conn) error {
		done, err := c.admin.RequeueDead(ctx, f.queue, sel, func(r admin.Requeued) {
			if f.jsonOut {
				_ = json.NewEncoder(a.stdout).Encode(r)
			} else {
				fmt.Fprintf(a.stdout, "requeued %s (dead letter #%d, now sequence %d)\n", r.JobID, r.DeadSeq, r.Sequence)
			}
		}, admin.RequeueKind(f.kind))
		if err != nil {
			return err
		}
		if !f.jsonOut && len(done) == 0 {
			fmt.Fprintf(a.stdout, "no dead letters in %s\n", f.queue)
		}
		return nil
	})
}
