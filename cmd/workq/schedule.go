package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

func (a *app) scheduleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Periodic jobs: add, list, pause, resume and remove a queue's schedules",
		Long: `Periodic jobs, fired by the NATS server itself from schedules kept in the
queue's stream. Each firing is one job whose id is the schedule's name and the
firing's time (nightly/20261124T020000Z), so a firing never runs twice.`,
	}
	cmd.AddCommand(a.scheduleAddCommand(), a.scheduleListCommand(), a.scheduleGetCommand(),
		a.scheduleSetCommand("pause", "Stop a schedule from firing until resumed", (*admin.Admin).PauseSchedule),
		a.scheduleSetCommand("resume", "Make a paused schedule fire again from now on", (*admin.Admin).ResumeSchedule),
		a.scheduleRemoveCommand())
	return cmd
}

// scheduleAddFlags is `workq schedule add`.
type scheduleAddFlags struct {
	queue, name string
	payload     string
	cron, tz    string
	every       time.Duration
	kind        string
	headers     []string
	maxAttempts int
	jsonOut     bool

	spec   string      // built by validate
	header nats.Header // --header, parsed by validate
}

func (a *app) scheduleAddCommand() *cobra.Command {
	f := &scheduleAddFlags{}
	cmd := &cobra.Command{
		Use:   "add <queue> <name> [payload] --cron '<5 fields>' [--tz <zone>] | --every <duration>",
		Short: "Add a periodic schedule, or change the one of that name",
		Long: `Add a periodic schedule to a queue (created if missing), or change the one of
that name. --cron takes five fields (minute hour day-of-month month day-of-week)
or @hourly, @daily, @weekly, @monthly, @yearly, read in UTC or in --tz; --every
takes an interval of whole seconds, at least 1s. Adding a schedule exactly as it
is changes nothing. Prints the schedule and its next firing.`,
		Example: `  workq schedule add reports nightly '{"report":"sales"}' --cron '0 2 * * *' --tz Europe/Berlin --kind report
  workq schedule add health ping --every 30s`,
		Args:              rangeArgs(2, 3, "<queue> <name> [payload]"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.name = args[0], args[1]
			if len(args) == 3 {
				f.payload = args[2]
			}
			return a.execute(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cron, "cron", "", "cron spec: five fields, or @hourly, @daily, @weekly, @monthly, @yearly")
	fl.StringVar(&f.tz, "tz", "", "IANA time zone the cron spec is read in (default UTC)")
	fl.DurationVar(&f.every, "every", 0, "fire at this interval (whole seconds, at least 1s)")
	fl.StringVar(&f.kind, "kind", "", "kind of the jobs it fires")
	fl.StringArrayVarP(&f.headers, "header", "H", nil, "header k=v of the jobs it fires (repeatable)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 0, "attempt limit of the jobs it fires (default: the worker's)")
	fl.BoolVar(&f.jsonOut, "json", false, "print the schedule as JSON")
	return cmd
}

func (f *scheduleAddFlags) validate() error {
	var err error
	if f.header, err = parseHeaders(f.headers); err != nil {
		return err
	}
	switch {
	case f.cron == "" && f.every == 0:
		return errors.New("give --cron or --every")
	case f.cron != "" && f.every != 0:
		return errors.New("--cron and --every exclude each other")
	case f.tz != "" && f.cron == "":
		return errors.New("--tz goes with --cron")
	case f.maxAttempts < 0:
		return fmt.Errorf("--max-attempts %d: want ≥ 1", f.maxAttempts)
	case f.every != 0:
		f.spec = "@every " + f.every.String()
	case f.tz != "":
		f.spec = "TZ=" + f.tz + " " + f.cron
	default:
		f.spec = f.cron
	}
	return nil
}

// run adds the schedule and shows it.
func (f *scheduleAddFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "schedule add", func(ctx context.Context, c *conn) error {
		p, err := producer.New(ctx, c.js, f.queue)
		if err != nil {
			return err
		}
		s, err := p.Schedule(ctx, f.name, f.spec, []byte(f.payload), producer.Kind(f.kind), producer.MaxAttempts(f.maxAttempts), headerOpts(f.header))
		if errors.Is(err, producer.ErrInvalidSchedule) {
			return usageError{strip(err)}
		}
		if err != nil {
			return err
		}
		return showSchedule(a, s, f.jsonOut)
	})
}

// scheduleListFlags is `workq schedule ls`.
type scheduleListFlags struct {
	queue   string
	jsonOut bool
}

func (a *app) scheduleListCommand() *cobra.Command {
	f := &scheduleListFlags{}
	cmd := &cobra.Command{
		Use:               "ls <queue>",
		Short:             "List a queue's schedules with their next firing",
		Args:              exactArgs(1, "<queue>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue = args[0]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print JSON")
	return cmd
}

func (f *scheduleListFlags) validate() error { return nil }

func (f *scheduleListFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "schedule ls", func(ctx context.Context, c *conn) error {
		list, err := c.admin.Schedules(ctx, f.queue)
		if err != nil {
			return err
		}
		if f.jsonOut {
			out := make([]scheduleOutput, 0, len(list))
			for i := range list {
				out = append(out, scheduleJSON(&list[i]))
			}
			return writeJSON(a.stdout, out)
		}
		if len(list) == 0 {
			fmt.Fprintln(a.stdout, "no schedules")
			return nil
		}
		t := newTable(a.stdout, "NAME", "SPEC", "STATE", "NEXT", "KIND")
		for _, s := range list {
			t.row(s.Name, s.Spec, scheduleState(&s), next(s.Next), s.Kind)
		}
		return t.flush()
	})
}

// scheduleGetFlags is `workq schedule get`.
type scheduleGetFlags struct {
	queue, name string
	jsonOut     bool
}

func (a *app) scheduleGetCommand() *cobra.Command {
	f := &scheduleGetFlags{}
	cmd := &cobra.Command{
		Use:               "get <queue> <name>",
		Short:             "Show one schedule: spec, state, next firing, the job it fires",
		Args:              exactArgs(2, "<queue> <name>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.name = args[0], args[1]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print JSON")
	return cmd
}

func (f *scheduleGetFlags) validate() error { return nil }

func (f *scheduleGetFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "schedule get", func(ctx context.Context, c *conn) error {
		s, err := c.admin.Schedule(ctx, f.queue, f.name)
		if err != nil {
			return err
		}
		return showSchedule(a, s, f.jsonOut)
	})
}

// scheduleSetFlags is `workq schedule pause` and `resume`.
type scheduleSetFlags struct {
	what        string
	queue, name string
	set         func(*admin.Admin, context.Context, string, string) (*admin.ScheduleInfo, error)
}

func (a *app) scheduleSetCommand(use, short string, set func(*admin.Admin, context.Context, string, string) (*admin.ScheduleInfo, error)) *cobra.Command {
	f := &scheduleSetFlags{what: "schedule " + use, set: set}
	return &cobra.Command{
		Use:               use + " <queue> <name>",
		Short:             short,
		Args:              exactArgs(2, "<queue> <name>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.name = args[0], args[1]
			return a.execute(cmd.Context(), f)
		},
	}
}

func (f *scheduleSetFlags) validate() error { return nil }

func (f *scheduleSetFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, f.what, func(ctx context.Context, c *conn) error {
		s, err := f.set(c.admin, ctx, f.queue, f.name)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "schedule %s: %s, next %s\n", s.Name, scheduleState(s), next(s.Next))
		return nil
	})
}

// scheduleRemoveFlags is `workq schedule rm`.
type scheduleRemoveFlags struct{ queue, name string }

func (a *app) scheduleRemoveCommand() *cobra.Command {
	f := &scheduleRemoveFlags{}
	return &cobra.Command{
		Use:               "rm <queue> <name>",
		Short:             "Remove a schedule (jobs it fired already stay)",
		Args:              exactArgs(2, "<queue> <name>"),
		ValidArgsFunction: a.completeQueues,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.queue, f.name = args[0], args[1]
			return a.execute(cmd.Context(), f)
		},
	}
}

func (f *scheduleRemoveFlags) validate() error { return nil }

func (f *scheduleRemoveFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "schedule rm", func(ctx context.Context, c *conn) error {
		if err := c.admin.RemoveSchedule(ctx, f.queue, f.name); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "schedule %s removed\n", f.name)
		return nil
	})
}

// scheduleOutput is a schedule as --json prints it.
type scheduleOutput struct {
	Name        string              `json:"name"`
	Spec        string              `json:"spec"`
	Paused      bool                `json:"paused"`
	Next        time.Time           `json:"next,omitzero"`
	Kind        string              `json:"kind,omitempty"`
	MaxAttempts int                 `json:"max_attempts,omitempty"`
	Headers     map[string][]string `json:"headers,omitempty"`
	Payload     string              `json:"payload"`
	UpdatedAt   time.Time           `json:"updated_at"`
}

func scheduleJSON(s *producer.ScheduleInfo) scheduleOutput {
	return scheduleOutput{Name: s.Name, Spec: s.Spec, Paused: s.Paused, Next: s.Next, Kind: s.Kind, MaxAttempts: s.MaxAttempts,
		Headers: s.Header, Payload: string(s.Payload), UpdatedAt: s.UpdatedAt}
}

// showSchedule prints one schedule.
func showSchedule(a *app, s *producer.ScheduleInfo, jsonOut bool) error {
	if jsonOut {
		return writeJSON(a.stdout, scheduleJSON(s))
	}
	fields := []field{
		{"name", s.Name},
		{"spec", s.Spec},
		{"state", scheduleState(s)},
		{"next firing", next(s.Next)},
		{"kind", s.Kind},
	}
	if s.MaxAttempts > 0 {
		fields = append(fields, field{"max attempts", s.MaxAttempts})
	}
	for k, v := range s.Header {
		fields = append(fields, field{"header " + k, strings.Join(v, ", ")})
	}
	fields = append(fields, field{"payload", printable(s.Payload)}, field{"updated", s.UpdatedAt})
	return writeFields(a.stdout, fields)
}

func scheduleState(s *producer.ScheduleInfo) string {
	if s.Paused {
		return "paused"
	}
	return "active"
}

// next shows a next firing time: local time and how far ahead.
func next(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%s (in %s)", t.Local().Format("2006-01-02 15:04:05 MST"), time.Until(t).Round(time.Second))
}
