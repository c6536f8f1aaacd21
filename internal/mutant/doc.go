// Package mutant holds the test-only switches that revert one rule of the delivery
// protocol in the shipped code, and the record of which rows of the claim decision
// ran. The simulation (internal/sim) turns each switch on in turn and must find the
// broken invariant, and must reach every row: so it is known to check the code that
// ships, not a copy of it.
//
// In a normal build every switch is off and every call is an empty function the
// compiler removes: On is the constant false, and Reached does nothing. Only a
// build with the workqmutants tag (go test -tags workqmutants ./internal/sim) has
// switches that can be turned on.
package mutant

// The switches. Each names the rule it reverts.
const (
	// BlindCreate: the claim of a delivery that sees no record writes whatever is
	// at the key, instead of creating the record only where there is none.
	BlindCreate = "blind-create"
	// CancelledReruns: only a done record ends a copy of its enqueue; a cancelled
	// one runs again.
	CancelledReruns = "cancelled-reruns"
	// DeliveryCount: a claim's attempt is the delivery's count from JetStream, not
	// the record's attempts plus one.
	DeliveryCount = "delivery-count"
	// EarlyTakeover: a running record is taken over at once, without waiting out
	// its lease.
	EarlyTakeover = "early-takeover"
	// UnfencedCommit: a run writes its outcome over whatever the record holds, not
	// by compare-and-set on its claim.
	UnfencedCommit = "unfenced-commit"
)

// All is every switch.
var All = []string{BlindCreate, CancelledReruns, DeliveryCount, EarlyTakeover, UnfencedCommit}
