package kvlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/workq/workq/testenv"
)

// A 3-node R3 bucket keeps working when one node (the bucket's stream leader) stops:
// the holder keeps its lock, others are locked out, then the lock changes hands.
func TestClusterSurvivesNodeLoss(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster test")
	}
	begin := time.Now()
	cl := testenv.StartCluster(t, 3)
	ctx := testenv.Context(t, 90*time.Second)
	// Where the time went, for a run that runs out of it on a loaded machine.
	phase := func(name string) { t.Logf("%s at %s", name, time.Since(begin).Round(time.Millisecond)) }
	holder := newTestLocker(t, cl.JetStream(t), Replicas(3), Owner("holder"))
	other := newTestLocker(t, cl.JetStream(t), Replicas(3), Owner("other"))

	// A lease long enough to outlast a leader election and the clients' reconnects on
	// a loaded 2-core machine; a holder that cannot renew for 90% of it is lost.
	lk, err := holder.Acquire(ctx, "replicated", TTL(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Replicated conflicts come back as 10164 or 10071: both mean "locked".
	if _, err := other.TryAcquire(ctx, "replicated"); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryAcquire on R3: %v, want ErrLocked", err)
	}

	leader := cl.StreamLeader("KV_" + DefaultBucket)
	if leader < 0 {
		t.Fatal("no stream leader")
	}
	cl.Stop(leader)
	phase(fmt.Sprintf("stopped node %d, the bucket's leader,", leader))

	// The holder renews through the new leader.
	lk.mu.Lock()
	renewed := lk.rev
	lk.mu.Unlock()
	testenv.Eventually(t, 30*time.Second, "a renewal after the leader stopped", func() bool {
		if isClosed(lk.Lost()) {
			t.Fatal("holder lost its lock while the cluster failed over")
		}
		lk.mu.Lock()
		defer lk.mu.Unlock()
		return lk.rev > renewed
	})
	if !lk.Held() || isClosed(lk.Lost()) {
		t.Fatal("holder lost its lock when a node stopped")
	}
	phase("renewed through the new leader")
	got := make(chan *Lock, 1)
	go func() {
		lk2, err := other.Acquire(ctx, "replicated")
		if err != nil {
			t.Error(err)
		}
		got <- lk2
	}()
	select {
	case <-got:
		t.Fatal("other acquired a held lock")
	case <-time.After(300 * time.Millisecond):
	}
	release(t, lk)
	var lk2 *Lock
	select {
	case lk2 = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("waiter not granted after release on a degraded cluster")
	}
	if lk2 == nil {
		return
	}
	phase("the waiter was granted")
	if lk2.Token() <= lk.Token() {
		t.Fatalf("token %d after %d", lk2.Token(), lk.Token())
	}
	// Contended cycles on two nodes still exclude each other.
	res := newFenced(1)
	done := make(chan struct{})
	for _, l := range []*Locker{holder, other} {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 5 {
				asked := time.Now()
				err := l.Do(ctx, "replicated-cycle", func(ctx context.Context, token uint64) error {
					if waited := time.Since(asked); waited > time.Second {
						phase(fmt.Sprintf("%s waited %s for grant %d", l.cfg.owner, waited.Round(time.Millisecond), token))
					}
					res.enter(l.cfg.owner, token, true)
					time.Sleep(2 * time.Millisecond)
					res.exit()
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	<-done
	<-done
	phase("the contended cycles ended")
	res.check(t, 10)
	release(t, lk2)
	cl.Restart(t, leader)
}
