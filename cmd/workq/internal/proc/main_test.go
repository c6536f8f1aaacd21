package proc_test

import (
	"os"
	"strings"
	"testing"

	"github.com/workq/workq/cmd/workq/internal/proc"
)

// On Linux, proc.Command starts the running program as the guard
// (`<program> _guard -- command…`): here that program is this test binary, which
// then runs proc.Guard, as workq does, instead of the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == proc.GuardName && os.Args[2] == "--" {
		os.Exit(proc.Guard(os.Args[3:], os.Stderr))
	}
	// A race-enabled binary sleeps a second when it exits with status 0 (the race
	// detector's atexit_sleep_ms) and the guard is this binary: not in the guards
	// these tests start.
	_ = os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}
