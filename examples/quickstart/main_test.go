package main

import "testing"

// The README's first quick-start command must keep working.
func TestQuickstartRuns(t *testing.T) {
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
