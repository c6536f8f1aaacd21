package queue

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// What a worker reads off a message any client may have published — subject, job id,
// schedule and unique headers — never panics, and the job id it settles on is always
// one workq can use as a record key.
func FuzzMessageHeaders(f *testing.F) {
	f.Add("workq.q.jobs.a", "a", "2026-11-24T02:00:00Z", "workq.q.periodic.nightly", "@daily", "2026-11-25T00:00:00Z", "1h", uint64(3))
	f.Add("workq.q.prio.4.x", "", "garbage", "workq.q.periodic.", "@every 0s", "", "-5s", uint64(1))
	f.Add("workq.q.prio.02", "bad id", "", "", "TZ=Nowhere 0 0 * * *", "purge", "99999999999h", uint64(0))
	n, err := NamesFor("q")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, subject, msgID, scheduledAt, scheduler, spec, next, uniqueFor string, seq uint64) {
		h := nats.Header{}
		h.Set(HeaderID, msgID)
		h.Set(HeaderScheduledAt, scheduledAt)
		h.Set(HeaderNatsScheduler, scheduler)
		h.Set(HeaderScheduleSpec, spec)
		h.Set(HeaderNatsScheduleNext, next)
		h.Set(HeaderUniqueFor, uniqueFor)
		ScheduledAt(h)
		if d := UniqueFor(h); d < 0 {
			t.Fatalf("UniqueFor(%q) = %v", uniqueFor, d)
		}
		if name, at, ok := n.Firing(h); ok && (name == "" || at.IsZero()) {
			t.Fatalf("Firing accepted %q at %v", name, at)
		}
		n.JobLevel(subject)
		if id := n.MessageJobID(subject, h, seq); CheckID(id) != nil {
			t.Fatalf("MessageJobID(%q, %q) = %q, not a usable id", subject, msgID, id)
		}
	})
}

// Limits stored in a stream's metadata by any client read back as valid limits or
// an error, never a panic.
func FuzzLimitsOf(f *testing.F) {
	for _, s := range []string{`{"max_running":3,"max_running_by_kind":{"a":1},"rate":10,"rate_window":"1s"}`, `{"rate":1,"rate_window":"1ms"}`, `{"max_running":-1}`, `[`, `null`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		cfg := jetstream.StreamConfig{Name: "WORKQ_q", Metadata: map[string]string{LimitsKey: v}}
		l, err := LimitsOf(cfg)
		if err == nil && l.Check() != nil {
			t.Fatalf("LimitsOf(%q) = %+v, which its own check refuses", v, l)
		}
	})
}
