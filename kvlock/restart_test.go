package kvlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/workq/workq/testenv"
)

// Held locks and their tokens survive a server restart (file storage): the holder
// reconnects and keeps renewing, others stay locked out, and later tokens are higher.
func TestLockSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t) // file storage
	holder := newTestLocker(t, env.JetStream(t), Owner("holder"))
	other := newTestLocker(t, env.JetStream(t))
	ctx := testenv.Context(t, 60*time.Second)

	lk, err := holder.Acquire(ctx, "durable", TTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	env.Restart(t)

	// The holder renews on the restarted server.
	testenv.Eventually(t, 15*time.Second, "a renewal after the restart", func() bool {
		lk.mu.Lock()
		rev := lk.rev
		lk.mu.Unlock()
		return rev > lk.Token()
	})
	if !lk.Held() || isClosed(lk.Lost()) {
		t.Fatal("holder lost its lock across the restart")
	}
	_, err = other.TryAcquire(ctx, "durable")
	var le *LockedError
	if !errors.As(err, &le) || len(le.Holders) != 1 || le.Holders[0].Owner != "holder" {
		t.Fatalf("after restart: %v, want locked by holder", err)
	}
	release(t, lk)
	lk2, err := other.Acquire(ctx, "durable")
	if err != nil {
		t.Fatal(err)
	}
	if lk2.Token() <= lk.Token() {
		t.Fatalf("token %d after restart, before %d", lk2.Token(), lk.Token())
	}
	release(t, lk2)

	// An Acquire made while the server is down waits for it.
	env.Stop()
	got := make(chan error, 1)
	go func() {
		lk, err := other.Acquire(ctx, "during-outage")
		if err == nil {
			err = lk.Release(ctx)
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Acquire returned while the server was down: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	env.Restart(t)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Acquire across the outage: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Acquire did not complete after the server came back")
	}
}

// A locker created while the server is down waits for it, within its context, as a
// producer and a worker do.
func TestNewWaitsForServer(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	env.Stop()
	js := env.JetStream(t) // connects once the server is back
	l := testenv.WaitsForServer(t, func() { env.Restart(t) },
		func(ctx context.Context) (*Locker, error) { return New(ctx, js) })
	lk, err := l.Acquire(testenv.Context(t, 30*time.Second), "late")
	if err != nil {
		t.Fatal(err)
	}
	release(t, lk)
}
