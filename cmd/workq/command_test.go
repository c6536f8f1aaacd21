package main

import (
	"context"
	"errors"
	"testing"
)

// validateCase is a command's flags and the error validate must give for them: the
// whole message, or "" for flags that are valid.
type validateCase struct {
	name string
	r    interface{ validate() error }
	want string
}

// checkValidate runs validate on each case's flags.
func checkValidate(t *testing.T, cases []validateCase) {
	t.Helper()
	for _, tc := range cases {
		if got := errText(tc.r.validate()); got != tc.want {
			t.Errorf("%s: validate() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// fakeRunner counts its runs and fails validate with err.
type fakeRunner struct {
	err  error
	runs int
}

func (f *fakeRunner) validate() error                 { return f.err }
func (f *fakeRunner) run(context.Context, *app) error { f.runs++; return nil }

// A command whose flags do not validate does not run, and fails with a usage
// error (exit 2); one whose flags do, runs.
func TestExecuteValidatesFirst(t *testing.T) {
	t.Parallel()
	a := &app{}
	bad := &fakeRunner{err: errors.New("--x 0: want ≥ 1")}
	err := a.execute(context.Background(), bad)
	var ue usageError
	if !errors.As(err, &ue) || err.Error() != "--x 0: want ≥ 1" || bad.runs != 0 {
		t.Errorf("execute with invalid flags = %v (usage error: %t), ran %d time(s); want the usage error and no run",
			err, errors.As(err, &ue), bad.runs)
	}
	good := &fakeRunner{}
	if err := a.execute(context.Background(), good); err != nil || good.runs != 1 {
		t.Errorf("execute with valid flags = %v, ran %d time(s); want nil and one run", err, good.runs)
	}
}
