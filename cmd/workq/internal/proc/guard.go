package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// GuardName is the hidden subcommand that runs Guard: Command starts
// `workq GuardName -- command [args]` where Guarded.
const GuardName = "_guard"

// guardSignal is the guard's parent-death signal: one that neither workq nor the
// group kills of --timeout and lost locks send, so the guard can tell them apart.
const guardSignal = syscall.SIGUSR1

// Guard is the guard process of a command started by Command: it runs argv, in the
// process group Command made, and waits for it. If workq dies (guardSignal, or the
// guard finds itself reparented) it kills the group, itself included. SIGINT and
// SIGTERM reach the command through the group; the guard lets the command decide.
// The command's end is passed on as the status Guard returns, for the guard to exit
// with: the command's exit status, or the signal that killed it, raised again on the
// guard (128 plus the signal if the guard survives it). Guard says on stderr why a
// command could not be started (status 127).
func Guard(argv []string, stderr io.Writer) int {
	parent := os.Getppid()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, guardSignal, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	if os.Getppid() != parent || parent == 1 {
		return 137 // workq is already gone
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "workq: start %s: %v\n", argv[0], err)
		return 127
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	orphaned := time.NewTicker(time.Second) // a parent-death signal cannot be missed, but check anyway
	defer orphaned.Stop()
	for {
		select {
		case s := <-sigs:
			if s == guardSignal || os.Getppid() != parent {
				_ = syscall.Kill(0, syscall.SIGKILL) // the group: the command, its children, the guard
			}
		case <-orphaned.C:
			if os.Getppid() != parent {
				_ = syscall.Kill(0, syscall.SIGKILL)
			}
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				if err != nil {
					fmt.Fprintf(stderr, "workq: %s: %v\n", argv[0], err)
					return 127
				}
				return 0
			}
			if sig, ok := signalOf(ee); ok {
				signal.Reset(sig)
				_ = syscall.Kill(os.Getpid(), sig)
				time.Sleep(time.Second) // the signal ends the guard; a caught one falls through
				return 128 + int(sig)
			}
			return ee.ExitCode()
		}
	}
}
