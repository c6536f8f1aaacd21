package kvlock

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/testenv"
)

// A release whose purge landed but whose reply was lost sends it again, meets its
// own marker, and reports the lock released: the marker names the grant it freed.
// It reported "taken over by another holder" (a CI run lost the reply while a new
// R3 bucket elected its leader); a release that meets another purge's marker still
// reports the lock not held.
func TestReleaseWhoseReplyWasLost(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	proxy := testenv.StartProxy(t, env.URL())
	holder := newTestLocker(t, proxy.JetStream(t), Owner("holder"))
	other := newTestLocker(t, env.JetStream(t), Owner("other"))
	ctx := testenv.Context(t, 30*time.Second)

	lk, err := holder.Acquire(ctx, "lossy", TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proxy.PauseReplies()
	released := make(chan error, 1)
	go func() { released <- lk.Release(ctx) }()
	// The purge reaches the server; its reply waits in the proxy.
	testenv.Eventually(t, 10*time.Second, "the release's purge stored", func() bool {
		e, err := other.kv.Get(ctx, lk.key)
		return err != nil || (e != nil && e.Operation() != jetstream.KeyValuePut)
	})
	proxy.Cut() // and is lost
	proxy.ResumeReplies()
	select {
	case err := <-released:
		if err != nil {
			t.Fatalf("Release whose reply was lost: %v; want released", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Release did not return")
	}
	// The lock is free at once.
	lk2, err := other.TryAcquire(ctx, "lossy")
	if err != nil {
		t.Fatalf("TryAcquire after the release: %v", err)
	}
	// Another purge's marker (an operator's forced release) is not this grant's:
	// its release reports the lock not held.
	if _, err := other.ForceRelease(ctx, "lossy", 0); err != nil {
		t.Fatal(err)
	}
	if err := lk2.Release(ctx); err == nil {
		t.Fatal("Release after a forced release: nil; want ErrNotHeld")
	}
}
