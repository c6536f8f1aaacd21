//go:build !workqmutants

package mutant

// Enabled says whether this build has the switches (the workqmutants tag).
const Enabled = false

// On reports whether the switch is on: never, in this build.
func On(string) bool { return false }

// Reached records that the claim decision ran the named row: nothing, in this build.
func Reached(string) {}
