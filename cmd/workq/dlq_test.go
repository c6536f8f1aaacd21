package main

import (
	"testing"

	"github.com/workq/workq/admin"
)

func TestDLQRequeueValidate(t *testing.T) {
	t.Parallel()
	const want = "name dead letters by job id or --seq, or give --all (not both)"
	checkValidate(t, []validateCase{
		{"job ids", &dlqRequeueFlags{queue: "q", ids: []string{"a", "b"}}, ""},
		{"sequences", &dlqRequeueFlags{queue: "q", seqs: []uint{3}}, ""},
		{"all", &dlqRequeueFlags{queue: "q", all: true}, ""},
		{"nothing named", &dlqRequeueFlags{queue: "q"}, want},
		{"all and a job id", &dlqRequeueFlags{queue: "q", all: true, ids: []string{"a"}}, want},
		{"all and a sequence", &dlqRequeueFlags{queue: "q", all: true, seqs: []uint{3}}, want},
	})
}

// dlq show takes a job id, or a dead-letter sequence with or without '#'.
func TestDLQShowNames(t *testing.T) {
	t.Parallel()
	d := admin.DeadLetter{JobID: "job-1", Sequence: 12}
	for which, want := range map[string]bool{
		"job-1": true, "12": true, "#12": true,
		"job-2": false, "13": false, "#13": false, "#": false, "#job-1": false, "": false,
	} {
		if got := names(which, d); got != want {
			t.Errorf("names(%q, job-1 #12) = %t, want %t", which, got, want)
		}
	}
}
