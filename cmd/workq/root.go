package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

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
	// second one kills the process the default way (unless a command listens for it
	// too, like the guard). This handler stops before the context is cancelled, so
	// that whatever a command does on the cancel (such as telling the user to signal
	// again) happens when a second signal kills: with the handler stopped after the
	// cancel, a second signal sent on that word went nowhere.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			signal.Stop(sigs)
			cancel()
		case <-ctx.Done():
		}
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
		a.workflowCommand(),
		a.sequenceCommand(),
		a.scheduleCommand(),
		a.dlqCommand(),
		a.lockCommand(),
		a.benchCommand(),
		a.benchWorkerCommand(),
		a.uiCommand(),
		a.permsCommand(),
	)
	if g := a.guardCommand(); g != nil {
		root.AddCommand(g)
	}
	return root
}
