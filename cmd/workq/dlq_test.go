package main

import "testing"

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
func TestDLQShowSelection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		which string
		seq   uint64 // 0: not a sequence
	}{{"12", 12}, {"#12", 12}, {"job-1", 0}, {"#", 0}} {
		sel := selection(tc.which)
		gotSeq := uint64(0)
		if len(sel.Sequences) == 1 {
			gotSeq = sel.Sequences[0]
		}
		if len(sel.IDs) != 1 || sel.IDs[0] != tc.which || gotSeq != tc.seq || len(sel.Sequences) > 1 {
			t.Errorf("selection(%q) = %+v; want the id %q and sequence %d", tc.which, sel, tc.which, tc.seq)
		}
	}
}
