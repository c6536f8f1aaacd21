//go:build chaos

package chaos

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// previousRelease is the build a rolling deploy upgrades from: the last commit before
// leases were judged by the server's clock and records kept the enqueues that ended
// (docs/operating.md, "Upgrading workers").
const previousRelease = "80dac59"

// TestChaosRollingDeploy: TestChaosSingleNode's chaos on a queue worked by two builds at
// once, as a rolling deploy leaves it: the previous release's workq in two of the
// three slots at the start, this one's in the third, and every replacement of a
// killed worker this release's. Slot 0, the one that is stalled past AckWait, runs the
// previous release to the end. Every invariant the chaos check holds must hold.
func TestChaosRollingDeploy(t *testing.T) {
	old := buildRelease(t, previousRelease)
	chaosSingleNode(t, "rolling-deploy ("+previousRelease+" and this build)", func(slot, gen int) string {
		if gen <= 2 {
			return old
		}
		return workqBin
	})
}

// buildRelease builds workq as it was at commit rev (of this checkout's history) and
// returns the binary's path. It skips the test where the history is not at hand (not a
// git checkout, or a shallow clone without rev).
func buildRelease(t *testing.T, rev string) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout (%v): the previous release cannot be built", err)
	}
	repo := strings.TrimSpace(string(top))
	if err := exec.Command("git", "-C", repo, "cat-file", "-e", rev+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in this checkout's history (a shallow clone?): the previous release cannot be built", rev)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", repo, rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, out)
	}
	bin := filepath.Join(binDir, "workq-"+rev)
	build := exec.Command("go", "build", "-o", bin, "./cmd/workq")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of %s: %v\n%s", rev, err, out)
	}
	return bin
}
