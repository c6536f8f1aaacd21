package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Every workq command has the same three parts: a struct of its flags and
// positional arguments, which cobra and the command's RunE fill in; validate, which
// checks them before anything connects; and run, which does the work. A bad flag is
// then a usage error (exit 2) that names it, found without a server, and validate
// can be tested without one.

// runner is a command's flags and arguments with the two steps that use them.
type runner interface {
	// validate checks the flags and arguments, and derives what run needs from them
	// (a parsed header, a listen address). Its errors are usage errors: say which
	// flag is wrong and what is wanted.
	validate() error
	// run does the command's work with the app's streams and connection flags.
	run(ctx context.Context, a *app) error
}

// execute validates r, failing with a usage error, then runs it.
func (a *app) execute(ctx context.Context, r runner) error {
	if err := r.validate(); err != nil {
		return usageError{err}
	}
	return r.run(ctx, a)
}

// exactArgs is cobra.ExactArgs with a usage error naming what is expected.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return rangeArgs(n, n, what)
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
