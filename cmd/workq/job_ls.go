package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// jobLsFlags is `workq job ls`: the queue and the query.
type jobLsFlags struct {
	queue   string
	state   string
	kind    string
	limit   int
	cursor  string
	jsonOut bool
}

func (a *app) jobLsCommand() *cobra.Command {
	f := &jobLsFlags{}
	cmd := &cobra.Command{
		Use:     "ls <queue>",
		Aliases: []string{"list"},
		Short:   "List a queue's jobs, newest first, by state and kind",
		Long: `List a queue's jobs, newest first — by the time their record was last written,
or they were enqueued if no worker has taken them yet — a page at a time: the
last line gives the --cursor of the next page. Jobs with records are listed for
the queue's record TTL (24h by default).`,
		Example: `  workq job ls emails
  workq job ls emails --state dead --kind send_email
  workq job ls emails --state retrying --limit 20 --json`,
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue = args[0]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().StringVar(&f.state, "state", "", "only jobs in this state: scheduled, waiting (a workflow task), queued, running, retrying, done, dead or cancelled")
	cmd.Flags().StringVar(&f.kind, "kind", "", "only jobs of this kind")
	cmd.Flags().IntVar(&f.limit, "limit", producer.DefaultJobsLimit, "jobs per page")
	cmd.Flags().StringVar(&f.cursor, "cursor", "", "continue after the page that printed it")
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, `print {"jobs":[…], "next":"<cursor>"}: each job its record and "updated"`)
	return cmd
}

func (f *jobLsFlags) validate() error {
	if f.state != "" && !slices.Contains(producer.States, producer.State(f.state)) {
		return usageError{fmt.Errorf("--state %q: want scheduled, waiting, queued, running, retrying, done, dead or cancelled", f.state)}
	}
	if f.limit < 1 {
		return usageError{fmt.Errorf("--limit %d: want at least 1", f.limit)}
	}
	return nil
}

// run prints one page of jobs.
func (f *jobLsFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "job ls", func(ctx context.Context, c *conn) error {
		page, err := c.admin.Jobs(ctx, f.queue, admin.JobQuery{State: producer.State(f.state), Kind: f.kind, Limit: f.limit, Cursor: f.cursor})
		if err != nil {
			return err
		}
		if f.jsonOut {
			if page.Jobs == nil {
				page.Jobs = []admin.ListedJob{}
			}
			return writeJSON(a.stdout, page)
		}
		if len(page.Jobs) == 0 {
			fmt.Fprintln(a.stdout, "no jobs")
			return nil
		}
		t := newTable(a.stdout, "ID", "STATE", "KIND", "ATTEMPT", "UPDATED", "WORKER", "ERROR")
		for _, j := range page.Jobs {
			attempt := fmt.Sprint(j.Attempt)
			if j.MaxAttempts > 0 {
				attempt += fmt.Sprintf("/%d", j.MaxAttempts)
			}
			errLine, _, _ := strings.Cut(j.LastError, "\n")
			t.row(j.ID, j.State, dash(j.Kind), attempt, ago(j.Updated), dash(j.Worker.Name), dash(truncate(errLine, 60)))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if page.Next != "" {
			fmt.Fprintf(a.stdout, "more: workq job ls %s --cursor %s%s\n", f.queue, page.Next, f.repeatFlags())
		}
		return nil
	})
}

// repeatFlags are the query's flags to repeat for the next page.
func (f *jobLsFlags) repeatFlags() string {
	var b strings.Builder
	if f.state != "" {
		fmt.Fprintf(&b, " --state %s", f.state)
	}
	if f.kind != "" {
		fmt.Fprintf(&b, " --kind %s", f.kind)
	}
	if f.limit != producer.DefaultJobsLimit {
		fmt.Fprintf(&b, " --limit %d", f.limit)
	}
	return b.String()
}

// dash shows an empty cell as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
