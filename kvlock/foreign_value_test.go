package kvlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/testenv"
)

// A lock bucket is public: any client with write access can put anything at a lock
// key, a semaphore slot or a limiter's subject. These tests put hostile values there
// and check that no call panics or hangs past its context, none reports a lock its
// caller does not hold, a foreign value counts as held by someone else (until a
// waiter has seen it unchanged for its own lease), and Release never removes it.

// foreignLockValues are values another client may put at a lock key.
func foreignLockValues(maxPayload int64) []struct{ name, value string } {
	return []struct{ name, value string }{
		{"garbage", "\x00\xff\xfe not json {{{"},
		{"huge-json", fmt.Sprintf(`{"junk":%q}`, strings.Repeat("x", int(maxPayload)-4096))},
		{"negative-lease", `{"owner":"intruder","host":"h","pid":1,"lease_ms":-1000,"id":"f"}`},
		// A lease that does not fit a time.Duration: read as it was, it overflowed to
		// a negative lease, and a waiter took the lock over at once.
		{"overflowing-lease", `{"owner":"intruder","host":"h","pid":1,"lease_ms":9223372036854775807,"id":"f"}`},
		{"empty-holder", `{"owner":"","host":"","pid":0,"lease_ms":60000,"id":""}`},
	}
}

// foreignPut publishes value at key of l's bucket as a plain client would (no TTL)
// and returns its revision.
func foreignPut(t *testing.T, js jetstream.JetStream, l *Locker, key, value string) uint64 {
	t.Helper()
	pa, err := js.Publish(testenv.Context(t, 10*time.Second), l.subjPre+key, []byte(value))
	if err != nil {
		t.Fatalf("foreign put at %s: %v", key, err)
	}
	return pa.Sequence
}

// wantStill checks that key still holds value at revision rev: nothing removed or
// replaced the foreign value.
func wantStill(t *testing.T, l *Locker, key, value string, rev uint64) {
	t.Helper()
	m, err := l.stream.GetLastMsgForSubject(testenv.Context(t, 10*time.Second), l.subjPre+key)
	if err != nil || m.Sequence != rev || !bytes.Equal(m.Data, []byte(value)) {
		t.Errorf("key %s: after the calls: %v (err %v); want the foreign value at revision %d left alone", key, m, err, rev)
	}
}

// wantLockedSoon checks that acquire fails with ErrLocked, within bound.
func wantLockedSoon(t *testing.T, what string, bound time.Duration, acquire func() (*Lock, error)) {
	t.Helper()
	start := time.Now()
	lk, err := acquire()
	if lk != nil || !errors.Is(err, ErrLocked) {
		t.Errorf("%s = %v, %v; want ErrLocked (a foreign value is someone else's)", what, lk, err)
	}
	if d := time.Since(start); d > bound {
		t.Errorf("%s took %s; want at most %s", what, d, bound)
	}
}

func TestForeignValueAtLockKeyIsHeldBySomeoneElse(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	l := newTestLocker(t, js)
	for _, v := range foreignLockValues(js.Conn().MaxPayload()) {
		t.Run(v.name, func(t *testing.T) {
			name := "foreign-" + v.name
			key, err := lockKey(kindLock, name)
			if err != nil {
				t.Fatal(err)
			}
			rev := foreignPut(t, js, l, key, v.value)
			wantLockedSoon(t, "TryAcquire", 3*time.Second, func() (*Lock, error) {
				return l.TryAcquire(testenv.Context(t, 10*time.Second), name)
			})
			// A waiter with a lease longer than its wait never takes the value over.
			wantLockedSoon(t, "Acquire for 700ms", 3*time.Second, func() (*Lock, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
				defer cancel()
				return l.Acquire(ctx, name, TTL(5*time.Second))
			})
			sem, err := l.Semaphore(name, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range sem.tg.keys {
				foreignPut(t, js, l, k, v.value)
			}
			wantLockedSoon(t, "semaphore TryAcquire", 3*time.Second, func() (*Lock, error) {
				return sem.TryAcquire(testenv.Context(t, 10*time.Second))
			})
			wantLockedSoon(t, "semaphore Acquire for 700ms", 3*time.Second, func() (*Lock, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
				defer cancel()
				return sem.Acquire(ctx, TTL(5*time.Second))
			})
			wantStill(t, l, key, v.value, rev)
		})
	}
}

// A waiter that watches a foreign value stay unchanged for the waiter's own lease
// (the value's, when it is a readable record) takes it over, by compare-and-set: it
// holds the lock then, and its Release removes its own value.
func TestForeignValueTakenOverAfterTheLease(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	l := newTestLocker(t, js)
	for _, v := range foreignLockValues(js.Conn().MaxPayload()) {
		if v.name == "empty-holder" {
			continue // a readable record with a lease of a minute: taken over after it
		}
		t.Run(v.name, func(t *testing.T) {
			name := "takeover-" + v.name
			key, _ := lockKey(kindLock, name)
			rev := foreignPut(t, js, l, key, v.value)
			start := time.Now()
			lk, err := l.Acquire(testenv.Context(t, 10*time.Second), name, TTL(300*time.Millisecond))
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if d := time.Since(start); d < 300*time.Millisecond {
				t.Errorf("took the foreign value over after %s, before the waiter's lease of 300ms", d)
			}
			if lk.Token() <= rev {
				t.Errorf("lock token %d over foreign revision %d", lk.Token(), rev)
			}
			// The key holds the lock's own value now. (Not Held: it answers by the
			// lease's clock, and a 300ms lease lapses when a loaded machine delays a
			// renewal, with no one there to take it.)
			m, err := l.stream.GetLastMsgForSubject(testenv.Context(t, 10*time.Second), l.subjPre+key)
			if err != nil || m.Sequence < lk.Token() || bytes.Equal(m.Data, []byte(v.value)) {
				t.Errorf("key %s after the takeover: %v (err %v); want the lock's value, at revision %d or later", key, m, err, lk.Token())
			}
			release(t, lk)
		})
	}
}

// heldTTL is the lease of the locks held while a foreign value is written over them:
// long enough that a renewal delayed on a busy machine does not lose a lock the test
// means to keep (the other semaphore slot).
const heldTTL = 2 * time.Second

// A foreign value written over a held lock: the holder loses it at its next renewal,
// and Release says ErrNotHeld and leaves the value alone.
func TestForeignValueOverAHeldLockIsNotReleased(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	l := newTestLocker(t, js)
	for _, v := range foreignLockValues(js.Conn().MaxPayload()) {
		t.Run(v.name, func(t *testing.T) {
			name := "held-" + v.name
			key, _ := lockKey(kindLock, name)
			lk, err := l.Acquire(testenv.Context(t, 10*time.Second), name, TTL(heldTTL))
			if err != nil {
				t.Fatal(err)
			}
			rev := foreignPut(t, js, l, key, v.value)
			if !closedWithin(lk.Lost(), heldTTL+3*time.Second) {
				t.Errorf("the lock was not lost within its lease and 3s of a foreign write over it")
			}
			if err := lk.Release(testenv.Context(t, 10*time.Second)); !errors.Is(err, ErrNotHeld) {
				t.Errorf("Release = %v; want ErrNotHeld", err)
			}
			wantStill(t, l, key, v.value, rev)

			// The same on a semaphore slot: the holder of the other slot is untouched.
			sem, err := l.Semaphore(name, 2)
			if err != nil {
				t.Fatal(err)
			}
			a, err := sem.Acquire(testenv.Context(t, 10*time.Second), TTL(heldTTL))
			if err != nil {
				t.Fatal(err)
			}
			b, err := sem.Acquire(testenv.Context(t, 10*time.Second), TTL(heldTTL))
			if err != nil {
				t.Fatal(err)
			}
			srev := foreignPut(t, js, l, a.key, v.value)
			if !closedWithin(a.Lost(), heldTTL+3*time.Second) {
				t.Errorf("the semaphore slot was not lost within its lease and 3s of a foreign write over it")
			}
			if err := a.Release(testenv.Context(t, 10*time.Second)); !errors.Is(err, ErrNotHeld) {
				t.Errorf("semaphore Release = %v; want ErrNotHeld", err)
			}
			wantStill(t, l, a.key, v.value, srev)
			if !b.Held() {
				t.Errorf("the other slot's holder lost it")
			}
			release(t, b)
		})
	}
}

// Foreign messages on a limiter's subject (garbage, nearly max payload) count as
// permits taken, as the server counts them: Allow says no with a retry time within
// the window, Wait gets a permit once they age out, and neither hangs.
func TestForeignMessagesOnALimiterSubject(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	l := newTestLocker(t, js)
	ctx := testenv.Context(t, 20*time.Second)
	lim, err := l.Limiter(ctx, "foreign", 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"\x00\xff garbage", strings.Repeat("x", int(js.Conn().MaxPayload())-4096)} {
		if _, err := js.Publish(ctx, lim.subject, []byte(v)); err != nil {
			t.Fatalf("foreign publish: %v", err)
		}
	}
	ok, after, err := lim.Allow(ctx)
	if ok || err != nil || after <= 0 || after > time.Second {
		t.Errorf("Allow = %v, %s, %v; want refused with a retry within the window of 1s", ok, after, err)
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := lim.Wait(wctx); err != nil {
		t.Errorf("Wait: %v; want a permit once the foreign ones aged out", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Wait took %s for a 1s window", d)
	}
}
