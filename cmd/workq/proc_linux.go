//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// The commands of `workq lock run` and `workq work` must not outlive workq: a
// command left running after workq died would hold no lock once the lease ran out,
// or run a job beside its redelivered copy. The kernel can signal a process when its
// parent dies (the parent-death signal), but only the direct child, and a command's
// own children (a shell script's) would run on. So on Linux workq starts each command
// through a guard, a copy of itself in the command's process group: the kernel
// signals the guard (guardSignal) when workq dies, and the guard kills the whole
// group with SIGKILL.

// guardName is the hidden subcommand that runs the guard.
const guardName = "_guard"

// guardSignal is the guard's parent-death signal: one that neither workq nor the
// group kills of --timeout and lost locks send, so the guard can tell them apart.
const guardSignal = syscall.SIGUSR1

// command returns the Cmd that runs argv in a process group of its own (so that
// --timeout, a lost job or a lost lock can signal all of it) under a guard that
// kills that group if workq dies, however it dies (SIGKILL, the OOM killer, a
// crash). A command that cannot be found fails here, as a Start error would.
//
// The kernel sends the parent-death signal when the thread that started the guard
// exits, not the process: the command must be started between pinThread and its
// unpin.
func command(argv []string) (*exec.Cmd, error) {
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find workq's own executable for the command's guard: %w", err)
	}
	cmd := exec.Command(self, append([]string{guardName, "--"}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: guardSignal}
	return cmd, nil
}

// pinThread locks the calling goroutine to its OS thread until the returned
// function is called, which must be after the command started by this goroutine has
// been waited for. Otherwise the Go runtime could end the thread (it ends a thread
// whose locked goroutine exits) and the kernel would signal the guard with it.
func pinThread() (unpin func()) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

func (a *app) guardCommand() *cobra.Command {
	return &cobra.Command{
		Use:                guardName + " -- command [args]",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			if len(args) == 0 {
				return usageError{errors.New(guardName + ": no command")}
			}
			if code := a.guard(args); code != 0 {
				return exitCodeError{code: code}
			}
			return nil
		},
	}
}

// guard runs argv in its own process group and waits for it. If workq dies
// (guardSignal, or the guard finds itself reparented) it kills the group, itself
// included. SIGINT and SIGTERM reach the command through the group; the guard lets
// the command decide. The command's end is passed on: its exit status, or the
// signal that killed it, raised again on the guard.
func (a *app) guard(argv []string) int {
	parent := os.Getppid()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, guardSignal, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	if os.Getppid() != parent || parent == 1 {
		return 137 // workq is already gone
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(a.stderr, "workq: start %s: %v\n", argv[0], err)
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
					fmt.Fprintf(a.stderr, "workq: %s: %v\n", argv[0], err)
					return 127
				}
				return 0
			}
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				signal.Reset(ws.Signal())
				_ = syscall.Kill(os.Getpid(), ws.Signal())
				time.Sleep(time.Second) // the signal ends the guard; a caught one falls through
				return 128 + int(ws.Signal())
			}
			return ee.ExitCode()
		}
	}
}
