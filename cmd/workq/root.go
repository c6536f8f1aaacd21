package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes. Scripts can tell a usage mistake from a failure.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// usageError is a mistake in the command line: a bad flag, a missing argument.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitError ends the command with a given exit status, having already said why (or
// with msg to say).
type exitCodeError struct {
	code int
	msg  string
}

func (e exitCodeError) Error() string { return e.msg }

// app is the state shared by every command: the streams it writes to and the
// connection flags.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	conn           connFlags
	// connLog, when set, is told about connection events of long-lived
	// connections: waiting for the server at start, lost, regained.
	connLog *slog.Logger
}

// run runs the CLI with args and returns the process's exit status. Errors are one
// line on stderr, "workq: …"; nothing panics at the user.
func run(args []string) int {
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	root := a.rootCommand()
	root.SetArgs(args)

	// The first SIGINT/SIGTERM cancels the context (commands drain or clean up); a
	// second one kills the process the default way.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()

	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ce exitCodeError
	if errors.As(err, &ce) {
		if ce.msg != "" {
			fmt.Fprintf(a.stderr, "workq: %s\n", ce.msg)
		}
		return ce.code
	}
	fmt.Fprintf(a.stderr, "workq: %s\n", oneLine(explain(err).Error()))
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		cmd, _, ferr := root.Find(args)
		if ferr != nil || cmd == nil {
			cmd = root
		}
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitUsage
	}
	return exitError
}

// isCobraUsage recognises cobra's own usage errors, which it returns untyped.
func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires at most", "invalid argument", "flag needs an argument", "required flag"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return s
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "workq",
		Short: "Job queues and distributed locks on NATS JetStream",
		Long: `workq runs job queues and distributed locks on NATS JetStream.

Start with 'workq demo' (no setup needed), or 'workq server' for a local server,
then 'workq enqueue', 'workq work' and the inspection commands.

Connection flags work like the nats CLI's; the server defaults to $NATS_URL,
else nats://127.0.0.1:4222.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	a.conn.register(root)
	root.AddCommand(
		a.serverCommand(),
		a.demoCommand(),
		a.enqueueCommand(),
		a.workCommand(),
		a.queueCommand(),
		a.jobCommand(),
		a.dlqCommand(),
		a.lockCommand(),
		a.benchCommand(),
		a.benchWorkerCommand(),
	)
	if g := a.guardCommand(); g != nil {
		root.AddCommand(g)
	}
	return root
}

// exactArgs is cobra.ExactArgs with a usage error naming what is expected.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s: want %s, got %d argument(s)", path(cmd), what, len(args))}
		}
		return nil
	}
}

// rangeArgs accepts between lo and hi arguments.
func rangeArgs(lo, hi int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usageError{fmt.Errorf("%s: want %s, got %d argument(s)", path(cmd), what, len(args))}
		}
		return nil
	}
}

// commandArgs splits "name -- command args…" for work and lock run: the positional
// arguments before "--" and the command after it.
func commandArgs(cmd *cobra.Command, args []string, nBefore int, what string) ([]string, []string, error) {
	dash := cmd.ArgsLenAtDash()
	if dash < 0 {
		return nil, nil, usageError{fmt.Errorf("%s: want %s -- command [args...]", path(cmd), what)}
	}
	before, after := args[:dash], args[dash:]
	if len(before) != nBefore {
		return nil, nil, usageError{fmt.Errorf("%s: want %s before --, got %d argument(s)", path(cmd), what, len(before))}
	}
	if len(after) == 0 {
		return nil, nil, usageError{fmt.Errorf("%s: no command after --", path(cmd))}
	}
	return before, after, nil
}

// path is the command's path without the program name, for messages.
func path(cmd *cobra.Command) string { return strings.TrimPrefix(cmd.CommandPath(), "workq ") }
