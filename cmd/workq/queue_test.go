package main

import (
	"testing"
	"time"
)

func TestQueueSetValidate(t *testing.T) {
	t.Parallel()
	checkValidate(t, []validateCase{
		{"ack wait", &queueSetFlags{queue: "q", ackWait: time.Minute, ackWaitSet: true}, ""},
		{"shortest ack wait", &queueSetFlags{queue: "q", ackWait: 100 * time.Millisecond, ackWaitSet: true}, ""},
		{"nothing to set", &queueSetFlags{queue: "q", force: true}, "queue set: nothing to set (--ack-wait)"},
		{"ack wait below 100ms", &queueSetFlags{queue: "q", ackWait: 99 * time.Millisecond, ackWaitSet: true}, "--ack-wait 99ms: want at least 100ms"},
		{"ack wait 0", &queueSetFlags{queue: "q", ackWaitSet: true}, "--ack-wait 0s: want at least 100ms"},
	})
}

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
