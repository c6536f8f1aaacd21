package protocol

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Every row of DecideClaim, and the rows that must not match: a terminal record of
// this enqueue ends every copy, and so does the record of a later enqueue that
// remembers it; a repeat within the duplicate window never runs; another enqueue's
// live record holds the id; a lease is taken over only once its revision is a lease
// old by the server's clock.
func TestDecideClaim(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	const lease = 10 * time.Second
	stored := now.Add(-time.Hour)
	const window = 2 * time.Minute
	d := Delivery{Enqueue: "e1", MaxAttempts: 3, StoredAt: stored, Window: window, Dedup: true}
	rec := func(s State, attempt int, enqueue string) *Record {
		return &Record{State: s, Attempt: attempt, Enqueue: enqueue, Run: "r0", Lease: lease, Revision: 7,
			StoredAt: stored.Add(-window), Ended: []string{"e-2", "e-1"}, WrittenAt: now.Add(-time.Second)}
	}
	at := func(r *Record, written time.Time) *Record { r.WrittenAt = written; return r }
	storedAt := func(r *Record, t time.Time) *Record { r.StoredAt = t; return r }
	clock := func(d Delivery) Delivery { d.ServerNow = now; return d }
	foreign := d
	foreign.Dedup = false
	retrying := func(at time.Time) *Record { r := rec(Retrying, 1, "e1"); r.RetryAt = at; return r }
	rows := map[string]bool{} // the rows the table reached: every one
	defer func() {
		for _, r := range Rules {
			if !rows[r] && !t.Failed() {
				t.Errorf("no case of the table is decided by the row %q", r)
			}
		}
	}()
	for _, c := range []struct {
		name    string
		rec     *Record
		d       Delivery
		want    Verdict
		attempt int           // Claim: the attempt claimed
		wait    time.Duration // Watch, Later
	}{
		{name: "no record", rec: nil, d: d, want: Claim, attempt: 1},
		{name: "no record, no attempts allowed", rec: nil, d: Delivery{Enqueue: "e1"}, want: Exhausted},
		{name: "another enqueue done", rec: rec(Done, 2, "e0"), d: d, want: Claim, attempt: 1},
		{name: "another enqueue dead", rec: rec(Dead, 3, "e0"), d: d, want: Claim, attempt: 1},
		{name: "another enqueue cancelled", rec: rec(Cancelled, 0, "e0"), d: d, want: Claim, attempt: 1},
		{name: "another enqueue running", rec: rec(Running, 1, "e0"), d: d, want: Later, wait: lease},
		{name: "another enqueue retrying", rec: rec(Retrying, 1, "e0"), d: d, want: Later, wait: lease},
		{name: "another enqueue running, its message gone", rec: rec(Running, 1, "e0"), d: Delivery{Enqueue: "e1", MaxAttempts: 3, OtherGone: true}, want: Claim, attempt: 1},
		{name: "a copy of an enqueue that ended before the record's", rec: rec(Done, 1, "e0"), d: Delivery{Enqueue: "e-1", MaxAttempts: 3}, want: Ack},
		{name: "a copy of an enqueue that ended before the record's, which runs", rec: rec(Running, 1, "e0"), d: Delivery{Enqueue: "e-2", MaxAttempts: 3}, want: Ack},
		{name: "a repeat within the window of a done enqueue", rec: storedAt(rec(Done, 1, "e0"), stored.Add(-window+time.Millisecond)), d: d, want: Ack},
		{name: "a repeat within the window of a running enqueue", rec: storedAt(rec(Running, 1, "e0"), stored.Add(time.Second)), d: d, want: Ack},
		{name: "within the window, a message without the id as message id", rec: storedAt(rec(Done, 1, "e0"), stored), d: foreign, want: Claim, attempt: 1},
		{name: "an enqueue a window after the record's", rec: storedAt(rec(Done, 1, "e0"), stored.Add(-window)), d: d, want: Claim, attempt: 1},
		{name: "a repeat, the record's store time unknown", rec: storedAt(rec(Done, 1, "e0"), time.Time{}), d: d, want: Claim, attempt: 1},
		{name: "this enqueue running, OtherGone ignored", rec: rec(Running, 1, "e1"), d: Delivery{Enqueue: "e1", MaxAttempts: 3, OtherGone: true}, want: Clock},
		{name: "a foreign client's copy of a done job", rec: rec(Done, 1, ""), d: Delivery{MaxAttempts: 3}, want: Ack},
		{name: "done", rec: rec(Done, 1, "e1"), d: d, want: Ack},
		{name: "cancelled before a claim", rec: rec(Cancelled, 0, "e1"), d: d, want: Ack},
		{name: "cancelled after a claim, the server's clock not read", rec: rec(Cancelled, 1, "e1"), d: d, want: Clock},
		{name: "cancelled after a claim, part of a lease ago", rec: at(rec(Cancelled, 1, "e1"), now.Add(-4*time.Second)), d: clock(d), want: Watch, wait: 6*time.Second + WatchSlack},
		{name: "cancelled after a claim, a lease ago", rec: at(rec(Cancelled, 1, "e1"), now.Add(-lease)), d: clock(d), want: Ack},
		{name: "dead", rec: rec(Dead, 3, "e1"), d: d, want: Term},
		{name: "a workflow's task waiting for its parents", rec: rec(Waiting, 0, "e1"), d: d, want: Later, wait: lease},
		{name: "a released workflow task", rec: rec(Queued, 0, "e1"), d: d, want: Claim, attempt: 1},
		{name: "running, the server's clock not read", rec: rec(Running, 1, "e1"), d: d, want: Clock},
		{name: "running, written just now", rec: at(rec(Running, 1, "e1"), now), d: clock(d), want: Watch, wait: lease + WatchSlack},
		{name: "running, written part of a lease ago", rec: at(rec(Running, 1, "e1"), now.Add(-4*time.Second)), d: clock(d), want: Watch, wait: 6*time.Second + WatchSlack},
		{name: "running, lease expired", rec: at(rec(Running, 1, "e1"), now.Add(-lease)), d: clock(d), want: Claim, attempt: 2},
		{name: "running, lease expired, attempts used", rec: at(rec(Running, 3, "e1"), now.Add(-lease)), d: clock(d), want: Exhausted},
		{name: "retrying, due", rec: retrying(now), d: d, want: Claim, attempt: 2},
		{name: "retrying, due within the tolerance", rec: retrying(now.Add(RetryTolerance)), d: d, want: Claim, attempt: 2},
		{name: "retrying, not due", rec: retrying(now.Add(time.Minute)), d: d, want: Later, wait: time.Minute},
		{name: "retrying, attempts used", rec: func() *Record { r := retrying(now); r.Attempt = 3; return r }(), d: d, want: Exhausted},
		{name: "queued (handed back)", rec: rec(Queued, 1, "e1"), d: d, want: Claim, attempt: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := DecideClaim(c.rec, c.d, "r1", lease, now)
			if got.Verdict != c.want {
				t.Fatalf("verdict %s (%s), want %s", got.Verdict, got.Why, c.want)
			}
			if !slices.Contains(Rules, got.Rule) {
				t.Fatalf("decided by row %q, not one of Rules", got.Rule)
			}
			rows[got.Rule] = true
			switch got.Verdict {
			case Claim:
				n := got.Next
				if n.Attempt != c.attempt || n.State != Running || n.Run != "r1" || n.Enqueue != c.d.Enqueue || n.Lease != lease {
					t.Fatalf("claim %+v, want attempt %d running by r1 of enqueue %q, lease %s", n, c.attempt, c.d.Enqueue, lease)
				}
				if c.rec != nil && n.Revision != c.rec.Revision {
					t.Fatalf("claim over revision %d, want %d", n.Revision, c.rec.Revision)
				}
				wantEnded := []string(nil)
				if c.rec != nil {
					wantEnded = c.rec.Ended
					if c.rec.Enqueue != c.d.Enqueue {
						wantEnded = append(slices.Clone(wantEnded), c.rec.Enqueue)
					}
				}
				if !slices.Equal(n.Ended, wantEnded) {
					t.Fatalf("claim's ended enqueues %q, want %q", n.Ended, wantEnded)
				}
			case Watch, Later:
				if got.Wait != c.wait {
					t.Fatalf("wait %s, want %s", got.Wait, c.wait)
				}
			}
		})
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Claim: "claim", Ack: "ack", Term: "term", Exhausted: "exhausted", Watch: "watch", Later: "later", Clock: "clock", Verdict(99): "verdict(?)"} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q, want %q", int(v), got, want)
		}
	}
}

// A write is the run's own only at a later revision, by that run, in the state it
// wrote.
func TestLanded(t *testing.T) {
	r := &Record{State: Done, Run: "r1", Revision: 9}
	for _, c := range []struct {
		rec   *Record
		run   string
		state State
		prev  uint64
		want  bool
	}{
		{r, "r1", Done, 8, true},
		{r, "r1", Done, 9, false},   // not moved: the write did not land
		{r, "r2", Done, 8, false},   // another run's
		{r, "r1", Dead, 8, false},   // another write of the run's
		{nil, "r1", Done, 0, false}, // gone
	} {
		if got := Landed(c.rec, c.run, c.state, c.prev); got != c.want {
			t.Errorf("Landed(%+v, %s, %s, %d) = %v, want %v", c.rec, c.run, c.state, c.prev, got, c.want)
		}
	}
}

// The ended enqueues a record remembers are bounded: the oldest go.
func TestEndedBounded(t *testing.T) {
	rec := &Record{State: Done, Enqueue: "e9", Revision: 3}
	for i := range MaxEnded {
		rec.Ended = append(rec.Ended, fmt.Sprint("e", i))
	}
	got := DecideClaim(rec, Delivery{Enqueue: "e10", MaxAttempts: 1}, "r", time.Second, time.Now())
	if got.Verdict != Claim || len(got.Next.Ended) != MaxEnded || got.Next.Ended[0] != "e1" || got.Next.Ended[MaxEnded-1] != "e9" {
		t.Fatalf("%s: ended %q, want e1…e9", got.Verdict, got.Next.Ended)
	}
	if rec.Ended[0] != "e0" {
		t.Fatalf("the record read was changed: %q", rec.Ended)
	}
}
