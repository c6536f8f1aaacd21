package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

func (a *app) jobCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "List, look up, wait for and cancel jobs",
	}
	cmd.AddCommand(a.jobLsCommand(), a.jobGetCommand(), a.jobWaitCommand(), a.jobCancelCommand())
	return cmd
}

// jobGetFlags is `workq job get`: the queue, the job id and the flags.
type jobGetFlags struct {
	queue, id string
	jsonOut   bool
}

func (a *app) jobGetCommand() *cobra.Command {
	f := &jobGetFlags{}
	cmd := &cobra.Command{
		Use:   "get <queue> <id>",
		Short: "Show a job's record: state, attempts, worker, timings, error, result",
		Long: `Show a job's record, the JSON document workq keeps per job in the queue's
bucket WORKQ_<queue>_JOBS. A job enqueued but not yet claimed shows as queued,
a delayed job that has not fired as scheduled, with its due time. Records expire
after the queue's record TTL (24h by default).`,
		Args:              exactArgs(2, "<queue> <id>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.id = args[0], args[1]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print the job record as JSON (result in base64)")
	return cmd
}

func (f *jobGetFlags) validate() error { return nil }

// run shows the job's record.
func (f *jobGetFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "job get", func(ctx context.Context, c *conn) error {
		rec, err := c.admin.Job(ctx, f.queue, f.id)
		if err != nil {
			return err
		}
		return writeRecord(a.stdout, rec, f.jsonOut)
	})
}

// writeRecord prints a job's record as job get shows it: its fields, or with
// jsonOut the record as JSON (result in base64).
func writeRecord(w io.Writer, rec *admin.Record, jsonOut bool) error {
	if jsonOut {
		return writeJSON(w, rec)
	}
	attempts := fmt.Sprint(rec.Attempt)
	if rec.MaxAttempts > 0 {
		attempts += fmt.Sprintf(" of %d", rec.MaxAttempts)
	}
	fields := []field{
		{"id", rec.ID},
		{"queue", rec.Queue},
		{"kind", rec.Kind},
		{"state", string(rec.State)},
		{"attempt", attempts},
		{"sequence", rec.Sequence},
	}
	if !rec.Worker.IsZero() {
		fields = append(fields, field{"worker", fmt.Sprintf("%s (host %s, pid %d)", rec.Worker.Name, rec.Worker.Host, rec.Worker.PID)})
	}
	fields = append(fields, field{"enqueued", instant(rec.EnqueuedAt)}, field{"started", instant(rec.StartedAt)},
		field{"finished", instant(rec.FinishedAt)})
	if !rec.RetryAt.IsZero() {
		fields = append(fields, field{"retry at", instant(rec.RetryAt)})
	}
	if !rec.ScheduledAt.IsZero() {
		fields = append(fields, field{"scheduled for", instant(rec.ScheduledAt)})
	}
	if rec.Schedule != "" {
		fields = append(fields, field{"fired by schedule", rec.Schedule})
	}
	if rec.Workflow != "" {
		fields = append(fields, field{"workflow", rec.Workflow}, field{"task", rec.Task}, field{"parents", taskList(rec.Parents)},
			field{"dependents", taskList(rec.Dependents)}, field{"waiting for", taskList(rec.WaitingFor)},
			field{"failed parents", taskList(rec.FailedParents)})
		if rec.RunIfParentFailed {
			fields = append(fields, field{"runs if a parent failed", "yes"})
		}
	}
	if rec.SequenceKey != "" {
		after := dash(rec.After)
		if rec.State == producer.StateWaiting && len(rec.WaitingFor) > 0 {
			after += " (waiting for it to end)"
		}
		fields = append(fields, field{"sequence", rec.SequenceKey}, field{"after", after})
		if rec.Halted {
			fields = append(fields, field{"halted", "yes: the job before it died; 'workq sequence resume' runs it"})
		} else if rec.HaltOnDead {
			fields = append(fields, field{"halts if the job before dies", "yes"})
		}
	}
	if !rec.ProgressAt.IsZero() {
		fields = append(fields, field{"progress", progressText(rec)})
	}
	fields = append(fields, field{"last error", rec.LastError})
	if len(rec.Errors) > 1 || len(rec.Errors) == 1 && rec.Errors[0].Error != rec.LastError {
		for _, e := range rec.Errors {
			fields = append(fields, field{fmt.Sprintf("attempt %d failed", e.Attempt), cell(instant(e.At)) + ": " + truncate(firstLineOf(e.Error), 120)})
		}
	}
	fields = append(fields, field{"result", printable(rec.Result)})
	if rec.Revision > 0 {
		fields = append(fields, field{"revision", rec.Revision})
	}
	return writeFields(w, fields)
}

// progressText is a record's last progress report: "40% page 4 of 10 (at …)".
func progressText(rec *admin.Record) string {
	s := fmt.Sprintf("%.0f%%", 100*rec.Progress)
	if rec.ProgressNote != "" {
		s += " " + truncate(firstLineOf(rec.ProgressNote), 120)
	}
	return s + " (at " + cell(instant(rec.ProgressAt)) + ")"
}

// firstLineOf is s up to its first line break.
func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
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
