package kvlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/testenv"
)

// Up to n holders at once across connections, never more; each grant's token is
// unique and above every token granted before it was requested.
func TestSemaphoreAdmitsAtMostN(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	const n, workers, rounds = 3, 6, 6
	ctx := testenv.Context(t, 60*time.Second)
	res := newFenced(n)
	var (
		mu        sync.Mutex
		maxInside int
		wg        sync.WaitGroup
	)
	for w := range workers {
		l := newTestLocker(t, env.JetStream(t))
		sem, err := l.Semaphore("pool", n)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				err := sem.Do(ctx, func(ctx context.Context, token uint64) error {
					res.enter(fmt.Sprintf("worker%d", w), token, false)
					res.mu.Lock()
					inside := res.inside
					res.mu.Unlock()
					mu.Lock()
					maxInside = max(maxInside, inside)
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
					res.exit()
					return nil
				}, TTL(5*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	res.check(t, workers*rounds)
	t.Logf("at most %d inside at once (limit %d)", maxInside, n)
	if maxInside < 2 {
		t.Errorf("semaphore of %d never admitted more than %d at once", n, maxInside)
	}
}

func TestSemaphoreTryAcquireAndTakeover(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	l := newTestLocker(t, env.JetStream(t), Owner("holders"))
	w := newTestLocker(t, env.JetStream(t), Owner("waiter"))
	ctx := testenv.Context(t, 30*time.Second)
	sem, err := l.Semaphore("slots", 2)
	if err != nil {
		t.Fatal(err)
	}
	const lease = 300 * time.Millisecond
	a, err := sem.TryAcquire(ctx, TTL(lease))
	if err != nil {
		t.Fatal(err)
	}
	b, err := sem.TryAcquire(ctx, TTL(lease))
	if err != nil {
		t.Fatal(err)
	}
	if b.Token() <= a.Token() || a.key == b.key {
		t.Fatalf("tokens %d, %d keys %q %q", a.Token(), b.Token(), a.key, b.key)
	}
	wsem, _ := w.Semaphore("slots", 2)
	_, err = wsem.TryAcquire(ctx)
	var le *LockedError
	if !errors.As(err, &le) || len(le.Holders) != 2 {
		t.Fatalf("full semaphore: %v, want ErrLocked with 2 holders", err)
	}
	// A lock of the same name is independent.
	lk, err := w.TryAcquire(ctx, "slots")
	if err != nil {
		t.Fatal(err)
	}
	release(t, lk)

	// One holder freezes: a waiter takes its slot within about the lease.
	got := make(chan *Lock, 1)
	go func() {
		c, err := wsem.Acquire(ctx, TTL(lease))
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	waitForWatchers(t, w, 1)
	a.paused.Store(true)
	start := time.Now()
	var c *Lock
	select {
	case c = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not take the frozen holder's slot")
	}
	if c == nil {
		return
	}
	t.Logf("slot taken over after %s (lease %s)", time.Since(start), lease)
	if c.key != a.key || c.Token() <= b.Token() {
		t.Fatalf("took slot %q token %d; frozen slot %q, last token %d", c.key, c.Token(), a.key, b.Token())
	}
	if !closedWithin(a.Lost(), time.Second) {
		t.Fatal("frozen holder's Lost did not fire")
	}
	if !b.Held() {
		t.Fatal("the live holder lost its slot")
	}
	if err := a.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("frozen holder's Release: %v, want ErrNotHeld", err)
	}
	release(t, b)
	release(t, c)
}
