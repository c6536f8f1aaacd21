package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/kvlock"
)

// lockView is a lock as --json shows it.
type lockView struct {
	Name     string    `json:"name"`
	Kind     string    `json:"kind"`
	Slot     *int      `json:"slot,omitempty"`
	Held     bool      `json:"held"`
	Owner    string    `json:"owner,omitempty"`
	Host     string    `json:"host,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Acquired time.Time `json:"acquired,omitzero"`
	Lease    string    `json:"lease,omitempty"`
	Revision uint64    `json:"revision,omitempty"`
}

func viewOf(name, kind string, slot int, h *kvlock.Holder) lockView {
	v := lockView{Name: name, Kind: kind}
	if slot >= 0 {
		v.Slot = &slot
	}
	if h != nil {
		v.Held, v.Owner, v.Host, v.PID, v.Acquired, v.Lease, v.Revision = true, h.Owner, h.Host, h.PID, h.Acquired, h.Lease.String(), h.Revision
	}
	return v
}

// lockLsFlags is `workq lock ls`.
type lockLsFlags struct {
	*lockFlags
	jsonOut bool
}

func (a *app) lockLsCommand(lf *lockFlags) *cobra.Command {
	f := &lockLsFlags{lockFlags: lf}
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List held locks and semaphore slots",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print JSON")
	return cmd
}

func (f *lockLsFlags) validate() error { return nil }

// run lists the held locks and semaphore slots of the bucket.
func (f *lockLsFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "lock ls", func(ctx context.Context, c *conn) error {
		views := []lockView{}
		l, err := f.existingLocker(ctx, c.js)
		if err != nil {
			return err
		}
		if l != nil {
			es, err := l.List(ctx)
			if err != nil {
				return err
			}
			for _, e := range es {
				views = append(views, viewOf(e.Name, e.Kind, e.Slot, &e.Holder))
			}
		}
		if f.jsonOut {
			return writeJSON(a.stdout, views)
		}
		if len(views) == 0 {
			fmt.Fprintln(a.stdout, "no locks held")
			return nil
		}
		t := newTable(a.stdout, "NAME", "KIND", "OWNER", "HOST", "PID", "SINCE", "LEASE", "REVISION")
		for _, v := range views {
			kind := v.Kind
			if v.Slot != nil {
				kind = fmt.Sprintf("semaphore slot %d", *v.Slot)
			}
			t.row(v.Name, kind, v.Owner, v.Host, v.PID, ago(v.Acquired), v.Lease, v.Revision)
		}
		return t.flush()
	})
}

// lockInfoFlags is `workq lock info`: the lock's name and the flags.
type lockInfoFlags struct {
	*lockFlags
	name    string
	jsonOut bool
}

func (a *app) lockInfoCommand(lf *lockFlags) *cobra.Command {
	f := &lockInfoFlags{lockFlags: lf}
	cmd := &cobra.Command{
		Use:   "info <name>",
		Short: "Show who holds a lock",
		Args:  exactArgs(1, "<name>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.name = args[0]
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print JSON")
	return cmd
}

func (f *lockInfoFlags) validate() error { return nil }

// run shows who holds the lock, if anyone.
func (f *lockInfoFlags) run(ctx context.Context, a *app) error {
	return a.withConn(ctx, "lock info", func(ctx context.Context, c *conn) error {
		var h *kvlock.Holder
		l, err := f.existingLocker(ctx, c.js)
		if err != nil {
			return err
		}
		if l != nil {
			if h, err = l.Inspect(ctx, f.name); err != nil {
				return err
			}
		}
		v := viewOf(f.name, "lock", -1, h)
		if f.jsonOut {
			return writeJSON(a.stdout, v)
		}
		if !v.Held {
			fmt.Fprintf(a.stdout, "lock %q is free\n", f.name)
			return nil
		}
		return writeFields(a.stdout, []field{
			{"lock", v.Name}, {"owner", v.Owner}, {"host", v.Host}, {"pid", v.PID},
			{"acquired", v.Acquired}, {"lease", v.Lease}, {"revision", v.Revision},
		})
	})
}
