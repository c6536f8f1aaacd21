package main

import "testing"

// The commands that delete for good want --yes, and say what they would delete.
func TestConfirmedValidate(t *testing.T) {
	t.Parallel()
	on := func(f *confirmedFlags, q string, yes bool) *confirmedFlags {
		f.queue, f.yes = q, yes
		return f
	}
	checkValidate(t, []validateCase{
		{"queue purge --yes", on(queuePurge(), "q", true), ""},
		{"queue rm --yes", on(queueRm(), "q", true), ""},
		{"dlq purge --yes", on(dlqPurge(), "q", true), ""},
		{"queue purge", on(queuePurge(), "emails", false), "purging queue emails deletes its jobs; add --yes to confirm"},
		{"queue rm", on(queueRm(), "emails", false), "removing queue emails deletes its jobs, dead letters and records; add --yes to confirm"},
		{"dlq purge", on(dlqPurge(), "emails", false), "purging the dead letters of emails deletes them for good; add --yes to confirm"},
	})
}
