package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
)

// dlqShowFlags is `workq dlq show`: the queue, the dead letter and the flags.
type dlqShowFlags struct {
	queue       string
	which       string // a job id, or a dead-letter sequence ("#12" or "12")
	jsonOut     bool
	payloadOnly bool
}

func (a *app) dlqShowCommand() *cobra.Command {
	f := &dlqShowFlags{}
	cmd := &cobra.Command{
		Use:               "show <queue> <job-id|seq>",
		Short:             "Show one dead letter: why it died, its headers and payload",
		Args:              exactArgs(2, "<queue> <job-id|seq>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.which = args[0], args[1]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print JSON (payload in base64)")
	cmd.Flags().BoolVar(&f.payloadOnly, "payload", false, "print only the raw payload")
	return cmd
}

func (f *dlqShowFlags) validate() error { return nil }

// run shows the latest dead letter of the job, or the one with the sequence.
func (f *dlqShowFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "dlq show", func(ctx context.Context, c *conn) error {
		ds, err := c.admin.DeadLetters(ctx, f.queue, 0, true)
		if err != nil {
			return err
		}
		var found []admin.DeadLetter
		for _, d := range ds {
			if names(f.which, d) {
				found = append(found, d)
			}
		}
		if len(found) == 0 {
			return fmt.Errorf("queue %s: %v: %s", f.queue, admin.ErrNoDeadLetter, f.which)
		}
		d := found[len(found)-1] // the latest death of that job
		switch {
		case f.payloadOnly:
			_, err := a.stdout.Write(d.Payload)
			return err
		case f.jsonOut:
			return writeJSON(a.stdout, d)
		}
		fields := []field{
			{"dead letter", d.Sequence},
			{"job", d.JobID},
			{"kind", d.Kind},
			{"attempts", d.Attempts},
			{"died", d.DeadAt},
			{"error", d.Error},
			{"original subject", d.Subject},
			{"original sequence", d.OrigSeq},
		}
		keys := make([]string, 0, len(d.Header))
		for k := range d.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fields = append(fields, field{"header " + k, strings.Join(d.Header[k], ", ")})
		}
		fields = append(fields, field{"payload", printable(d.Payload)})
		if len(found) > 1 {
			fields = append(fields, field{"note", fmt.Sprintf("%d dead letters for this job; showing the latest", len(found))})
		}
		return writeFields(a.stdout, fields)
	})
}

// names says whether which names the dead letter d: it is d's job id, or its
// dead-letter sequence ("#12" or "12").
func names(which string, d admin.DeadLetter) bool {
	if d.JobID == which {
		return true
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(which, "#"), 10, 64)
	return err == nil && d.Sequence == n
}
