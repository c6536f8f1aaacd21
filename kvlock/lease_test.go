package kvlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/workq/workq/testenv"
)

// A 1 s lock held for several seconds keeps others out (renewal keeps the TTL);
// when the holder's connection closes without releasing, a waiter gets the lock
// within about the TTL, and with nobody waiting the server's TTL removes it.
func TestRenewalKeepsLockThenFreesAfterHolderDies(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	holderConn := env.Conn(t)
	holderJS, _ := jetstream.New(holderConn)
	holder := newTestLocker(t, holderJS)
	other := newTestLocker(t, env.JetStream(t))
	ctx := testenv.Context(t, 30*time.Second)

	lk, err := holder.Acquire(ctx, "renewed", TTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// A waiter for 3 s (three TTLs) must not get it.
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = other.Acquire(wctx, "renewed", TTL(time.Second))
	cancel()
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("waiter during renewals: %v, want ErrLocked", err)
	}
	if !lk.Held() || isClosed(lk.Lost()) {
		t.Fatal("holder lost a lock it kept renewing")
	}
	e, err := other.kv.Get(ctx, "renewed")
	if err != nil || e.Revision() <= lk.Token() {
		t.Fatalf("no renewal visible: %v (rev %v, token %d)", err, e, lk.Token())
	}

	// Kill the holder: close its connection without releasing.
	got := make(chan *Lock, 1)
	go func() {
		// A 2 s lease for the new holder: its renewals (every 667 ms) must land under
		// a loaded CI machine's stalls before the server's TTL removes its key.
		lk2, err := other.Acquire(ctx, "renewed", TTL(2*time.Second))
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- lk2
	}()
	waitForWatchers(t, other, 1)
	killed := time.Now()
	holderConn.Close()
	select {
	case lk2 := <-got:
		if lk2 == nil {
			return
		}
		d := time.Since(killed)
		t.Logf("freed %s after the holder died (TTL 1s)", d)
		if d > 1500*time.Millisecond {
			t.Errorf("took %s to free a 1s lock", d)
		}
		if lk2.Token() <= lk.Token() {
			t.Errorf("token %d after %d", lk2.Token(), lk.Token())
		}
		if !closedWithin(lk.Lost(), time.Second) {
			t.Error("dead holder's Lost did not fire")
		}
		// Backstop: once this holder has renewed at least once (so the TTL being
		// tested is a renewal's, not the grant's: a renewal that dropped it, as
		// KeyValue.Update does, would leave the key forever), kill it too, with
		// nobody waiting; the server's TTL (1 s, checked with its own granularity)
		// removes the key (2 s after the last renewal, checked with its own granularity).
		waitForRenewals(t, other.kv, lk2, 1)
		lk2.paused.Store(true)
		w, err := other.kv.Watch(ctx, "renewed", jetstream.UpdatesOnly())
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		start := time.Now()
		deadline := time.NewTimer(4 * time.Second)
		defer deadline.Stop()
	expiry:
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					t.Fatal("watch ended before the abandoned lock was removed")
				}
				if e != nil && e.Operation() != jetstream.KeyValuePut {
					t.Logf("server expired the abandoned lock after %s", time.Since(start))
					break expiry
				}
			case <-deadline.C:
				t.Fatal("server TTL did not remove the abandoned lock within 4s of its last renewal")
			}
		}
		if d := time.Since(start); d > 3500*time.Millisecond {
			t.Errorf("server TTL removed the lock after %s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("lock not freed after its holder died")
	}
}

// A 300 ms lease whose holder stops renewing passes to a waiter well under a
// second; the old holder learns it from Lost first; its Release returns ErrNotHeld
// and leaves the new holder's lock alone; the new token is greater.
func TestSubSecondLeaseTakeover(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	old := newTestLocker(t, env.JetStream(t), Owner("old"))
	waiter := newTestLocker(t, env.JetStream(t), Owner("new"))
	third := newTestLocker(t, env.JetStream(t))
	ctx := testenv.Context(t, 30*time.Second)
	const lease = 300 * time.Millisecond

	lk, err := old.Acquire(ctx, "fast", TTL(lease))
	if err != nil {
		t.Fatal(err)
	}
	lostAt := make(chan time.Time, 1)
	go func() { <-lk.Lost(); lostAt <- time.Now() }()

	got := make(chan *Lock, 1)
	go func() {
		lk2, err := waiter.Acquire(ctx, "fast", TTL(lease))
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- lk2
	}()
	// Renewals go on for a while: the watching waiter must not get in. Of eight
	// renewals counted once it watches, at least seven were sent after, spanning two
	// leases or more.
	waitForWatchers(t, waiter, 1)
	waitForRenewals(t, third.kv, lk, 8)
	select {
	case <-got:
		t.Fatal("waiter got a lock that was being renewed")
	default:
	}
	paused := time.Now()
	lk.paused.Store(true) // the holder freezes: no more renewals

	var lk2 *Lock
	select {
	case lk2 = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not take over")
	}
	if lk2 == nil {
		return
	}
	grantedAt := time.Now()
	took := grantedAt.Sub(paused)
	t.Logf("taken over %s after the holder stopped renewing (lease %s)", took, lease)
	if took > 900*time.Millisecond {
		t.Errorf("takeover took %s with a %s lease", took, lease)
	}
	var lost time.Time
	select {
	case lost = <-lostAt:
	case <-time.After(2 * time.Second):
		t.Fatal("old holder's Lost did not fire")
	}
	// The old holder gives up at 90% of its lease after its last renewal; the waiter
	// waits the full lease after seeing it. Allow a little scheduling slack.
	if lost.After(grantedAt.Add(50 * time.Millisecond)) {
		t.Errorf("old holder learned of the loss %s after the new grant", lost.Sub(grantedAt))
	}
	if !errors.Is(context.Cause(lk.Context()), ErrLost) {
		t.Errorf("old lock context cause %v, want ErrLost", context.Cause(lk.Context()))
	}
	if lk2.Token() <= lk.Token() {
		t.Errorf("new token %d not above old %d", lk2.Token(), lk.Token())
	}
	if err := lk.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("old holder's Release: %v, want ErrNotHeld", err)
	}
	_, err = third.TryAcquire(ctx, "fast")
	var le *LockedError
	if !errors.As(err, &le) || len(le.Holders) != 1 || le.Holders[0].Owner != "new" {
		t.Fatalf("after the old Release: %v, want locked by new", err)
	}
	// The new holder keeps renewing its sub-second lease: after several renewals,
	// and past the point where its grant alone would have run out, it still holds it.
	lk2.mu.Lock()
	grantEnds := lk2.validUntil
	lk2.mu.Unlock()
	waitForRenewals(t, third.kv, lk2, 6)
	testenv.Eventually(t, 5*time.Second, "the end of the grant's own lease", func() bool {
		return time.Now().After(grantEnds)
	})
	if !lk2.Held() || isClosed(lk2.Lost()) {
		t.Fatal("new holder lost its lock")
	}
	release(t, lk2)
}

// A holder cut off from the server (connection closed) learns within its lease, on
// its own clock, that it can no longer trust the lock.
func TestCutOffHolderLosesWithinLease(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	nc := env.Conn(t)
	js, _ := jetstream.New(nc)
	l := newTestLocker(t, js)
	ctx := testenv.Context(t, 20*time.Second)
	const lease = 200 * time.Millisecond
	lk, err := l.Acquire(ctx, "cut", TTL(lease))
	if err != nil {
		t.Fatal(err)
	}
	waitForRenewals(t, l.kv, lk, 1) // cut after a renewal, not the grant
	cut := time.Now()
	nc.Close()
	if !closedWithin(lk.Lost(), 2*time.Second) {
		t.Fatal("cut-off holder's Lost did not fire")
	}
	d := time.Since(cut)
	t.Logf("cut-off holder lost its lock %s after the cut (lease %s)", d, lease)
	if d > lease+100*time.Millisecond {
		t.Errorf("lost after %s, lease %s", d, lease)
	}
	if lk.Held() {
		t.Error("Held after Lost")
	}
}

// A NoRenew lock that is never released frees itself: a waiting process gets it
// about one TTL after it was granted, well under a second for a sub-second TTL.
func TestNoRenewFreesItself(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	a := newTestLocker(t, env.JetStream(t))
	b := newTestLocker(t, env.JetStream(t))
	ctx := testenv.Context(t, 20*time.Second)
	const ttl = 300 * time.Millisecond
	got := make(chan *Lock, 1)
	first, err := a.Acquire(ctx, "self-freeing", TTL(ttl), NoRenew())
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	go func() {
		lk, err := b.Acquire(ctx, "self-freeing", TTL(ttl), NoRenew())
		if err != nil {
			t.Error(err)
		}
		got <- lk
	}()
	var second *Lock
	select {
	case second = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("never-released lock did not free itself")
	}
	if second == nil {
		return
	}
	d := time.Since(granted)
	t.Logf("never-released %s lock passed on %s after its grant", ttl, d)
	if d < ttl || d > 900*time.Millisecond {
		t.Errorf("passed on after %s with a %s TTL", d, ttl)
	}
	if !closedWithin(first.Lost(), time.Second) {
		t.Error("first holder's Lost not closed at the end of its lease")
	}
	if second.Token() <= first.Token() {
		t.Errorf("token %d after %d", second.Token(), first.Token())
	}
	if err := first.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release after the lease ended: %v", err)
	}
	release(t, second) // released early: fine
}
