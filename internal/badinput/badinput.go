// Package badinput runs the public packages' tests of entry points given bad input
// (nil, out of range): each call must return the documented error, or succeed where
// the input is documented as skipped, and must never panic. Only tests import it.
package badinput

import (
	"errors"
	"strings"
	"testing"
)

// Case is one call of an entry point with bad input. It is an alias of an unnamed
// struct type, so that tests write their tables with unkeyed fields.
type Case = struct {
	Name string
	Want string // "" when the call must succeed, else a part of its error
	Call func() error
}

// Run runs each case as a subtest of t and fails the ones that panic, return an
// error where none is wanted, or return no error or another error than the one
// wanted. A non-nil is is a sentinel every error wanted must also wrap.
func Run(t *testing.T, is error, cases []Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				err = c.Call()
			}()
			switch {
			case c.Want == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case c.Want != "" && (err == nil || !strings.Contains(err.Error(), c.Want)):
				t.Fatalf("error %v, want one saying %q", err, c.Want)
			case c.Want != "" && is != nil && !errors.Is(err, is):
				t.Fatalf("error %v does not wrap %q", err, is)
			}
		})
	}
}
