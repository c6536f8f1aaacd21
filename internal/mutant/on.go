//go:build workqmutants

package mutant

import (
	"sync"
	"sync/atomic"
)

// Enabled says whether this build has the switches (the workqmutants tag).
const Enabled = true

var (
	active atomic.Pointer[string]
	mu     sync.Mutex
	rows   = map[string]int{}
)

// On reports whether the switch is on.
func On(name string) bool {
	p := active.Load()
	return p != nil && *p == name
}

// Set turns the switch name on, and every other off ("" turns all off).
func Set(name string) {
	if name == "" {
		active.Store(nil)
		return
	}
	active.Store(&name)
}

// Reached records that the claim decision ran the named row.
func Reached(row string) {
	mu.Lock()
	rows[row]++
	mu.Unlock()
}

// Rows returns how many times each row ran since the last call, and starts again.
func Rows() map[string]int {
	mu.Lock()
	defer mu.Unlock()
	out := rows
	rows = map[string]int{}
	return out
}
