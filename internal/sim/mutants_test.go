//go:build workqmutants

package sim

import (
	"strings"
	"testing"

	"github.com/workq/workq/internal/mutant"
	"github.com/workq/workq/internal/protocol"
)

// mutantSeeds is how many seeds a mutant may take to be found.
const mutantSeeds = 150

// TestSimulationFindsEveryMutant turns on each test-only switch in the shipped
// worker (package mutant), one at a time, and runs seeds until a history breaks an
// invariant: a simulation that cannot find a reverted rule would not find the bug
// either.
func TestSimulationFindsEveryMutant(t *testing.T) {
	for _, m := range mutant.All {
		t.Run(m, func(t *testing.T) {
			mutant.Set(m)
			defer mutant.Set("")
			for seed := range int64(mutantSeeds) {
				if _, err := simulate(t, seed, false); err != nil {
					t.Logf("found by seed %d: %v", seed, firstLine(err))
					return
				}
			}
			t.Errorf("mutant %s: no history of %d seeds broke an invariant", m, mutantSeeds)
		})
	}
}

// TestSimulationReachesEveryRow runs seeds until every row of the claim decision
// has decided some delivery of the shipped worker: a row never reached is a rule
// the simulation does not check.
func TestSimulationReachesEveryRow(t *testing.T) {
	mutant.Rows()
	seen := map[string]int{}
	for seed := range int64(rowSeeds) {
		if _, err := simulate(t, seed, false); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for r, n := range mutant.Rows() {
			seen[r] += n
		}
	}
	t.Logf("rows reached over %d seeds: %v", rowSeeds, seen)
	for _, r := range protocol.Rules {
		if seen[r] == 0 {
			t.Errorf("no delivery of %d seeds was decided by the row %q", rowSeeds, r)
		}
	}
}

// rowSeeds is how many seeds TestSimulationReachesEveryRow runs.
const rowSeeds = 200

// firstLine is err's first line.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
