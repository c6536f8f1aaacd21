package main_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The workq binary is a production program: it must not link the testing package,
// nor testenv (the test kit built on it), as it did while `workq server` ran on
// testenv rather than on package embedded.
func TestBinaryDoesNotLinkTesting(t *testing.T) {
	t.Parallel()
	// The go command of the toolchain that runs this test, not whatever is first in
	// PATH for the package list.
	root, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	goBin := filepath.Join(strings.TrimSpace(string(root)), "bin", "go")
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 || !slices.Contains(deps, "github.com/workq/workq/consumer") {
		t.Fatalf("go list -deps listed %d packages without package consumer: not workq's dependencies", len(deps))
	}
	for _, banned := range []string{"testing", "github.com/workq/workq/testenv"} {
		if slices.Contains(deps, banned) {
			t.Errorf("the workq binary links %s", banned)
		}
	}
}
