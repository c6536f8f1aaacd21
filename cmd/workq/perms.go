package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/workq/workq/perms"
)

// permsFlags is `workq perms`: the role, what it is on, and how to print it.
type permsFlags struct {
	role   string
	name   string
	format string
	inbox  string
	perms  perms.Permissions // what validate worked out
}

func (a *app) permsCommand() *cobra.Command {
	f := &permsFlags{}
	cmd := &cobra.Command{
		Use:   "perms [queue|bucket] --role producer|worker|operator|lock-user",
		Short: "Print the NATS permissions a producer, worker, operator or lock user needs",
		Long: `Print the least permissions a NATS user needs for one role in a workq deployment,
to paste into a nats-server configuration (--format conf, the default: a user's
permissions block), into a user JWT's claims (--format json), or onto nsc (--format
nsc: the --allow-pub and --allow-sub flags of 'nsc add user' or 'nsc edit user').

  producer <queue>    enqueue to the queue (now, delayed, at a priority, unique) and
                      read its jobs' status
  worker <queue>      pull the queue's jobs, ack and heartbeat them, write their
                      records and dead letters, obey the queue's limits
  operator            everything workq's queue, job, dlq, schedule, lock and ui
                      commands do, on every queue and bucket of the account
  lock-user <bucket>  hold, wait on and release locks and semaphores in the bucket

Producers and workers may not create their queue: an operator runs 'workq queue
create' first (and 'workq queue set' for limits). A lock user's bucket is created
by an operator (any 'workq lock' command with --bucket). Every role subscribes to its
replies under the inbox prefix, _INBOX by default, which every user of the account
can read: give each user its own with --inbox-prefix (its clients then connect with
the same --inbox-prefix, or nats.CustomInboxPrefix), or separate users by account.`,
		Example: `  workq perms orders --role worker
  workq perms orders --role producer --format json
  workq perms --role operator --format nsc
  workq perms app-locks --role lock-user --inbox-prefix _INBOX_app1`,
		Args: rangeArgs(0, 1, "[queue|bucket]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				f.name = args[0]
			}
			return a.execute(cmd.Context(), f)
		},
	}
	cmd.Flags().StringVar(&f.role, "role", "", "producer, worker, operator or lock-user (required)")
	cmd.Flags().StringVar(&f.format, "format", "conf", "conf (nats-server configuration), json (user JWT permissions) or nsc (nsc flags)")
	cmd.Flags().StringVar(&f.inbox, "inbox-prefix", "_INBOX", "the user's inbox prefix, where the server sends its replies")
	_ = cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions(roleNames(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"conf", "json", "nsc"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func roleNames() []string {
	var s []string
	for _, r := range perms.Roles {
		s = append(s, string(r))
	}
	return s
}

func (f *permsFlags) validate() error {
	role := perms.Role(f.role)
	switch {
	case f.role == "":
		return fmt.Errorf("perms: --role is required: %s", strings.Join(roleNames(), ", "))
	case role == perms.Operator && f.name != "":
		return fmt.Errorf("perms: the operator role takes no queue or bucket (it covers them all), got %q", f.name)
	case (role == perms.Producer || role == perms.Worker) && f.name == "":
		return fmt.Errorf("perms: --role %s: name the queue", f.role)
	case role == perms.LockUser && f.name == "":
		return fmt.Errorf("perms: --role %s: name the lock bucket", f.role)
	case f.format != "conf" && f.format != "json" && f.format != "nsc":
		return fmt.Errorf("perms: --format %q: want conf, json or nsc", f.format)
	}
	var err error
	f.perms, err = perms.For(role, f.name, perms.Inbox(f.inbox))
	return err
}

// run prints the permissions; it needs no server.
func (f *permsFlags) run(_ context.Context, a *app) error {
	p := f.perms
	var err error
	what := "workq " + f.role
	if f.name != "" {
		what += " of " + f.name
	}
	switch f.format {
	case "json":
		_, err = a.stdout.Write(p.JSON())
	case "nsc":
		_, err = fmt.Fprintf(a.stdout, "# %s: nsc add user --name <user> ... or nsc edit user --name <user> ...\n%s\n", what, p.NSC())
	default:
		_, err = fmt.Fprintf(a.stdout, "# %s: put this in the user's entry of the server's configuration\n%s", what, p.Config())
	}
	return err
}
