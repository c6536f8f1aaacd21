package queue

import "testing"

// A job's id is its Nats-Msg-Id, else its subject's suffix, else its sequence, as
// the consumer derives it: readers outside the consumer must find the same record.
func TestJobID(t *testing.T) {
	t.Parallel()
	n, err := NamesFor("q")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		subject, msgID string
		seq            uint64
		want           string
	}{
		{"workq.q.jobs.order-42", "order-42", 7, "order-42"},
		{"workq.q.jobs.by-subject", "", 7, "by-subject"},
		{"workq.q.jobs", "by-header", 7, "by-header"},
		{"workq.q.jobs", "", 7, "seq-7"},
		{"workq.q.jobs", "bad id", 8, "seq-8"},
		{"workq.q.jobs.a", "bad id", 9, "a"},
	} {
		if got := n.JobID(c.subject, c.msgID, c.seq); got != c.want {
			t.Errorf("JobID(%q, %q, %d) = %q, want %q", c.subject, c.msgID, c.seq, got, c.want)
		}
	}
}
