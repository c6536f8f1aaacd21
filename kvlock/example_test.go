package kvlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/embedded"
	"github.com/workq/workq/kvlock"
)

// process stands for one program: its own connection and its own Locker.
func process(url string) (*kvlock.Locker, func()) {
	nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		log.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := kvlock.New(ctx, js)
	if err != nil {
		log.Fatal(err)
	}
	return l, nc.Close
}

// GET_LOCK(name, timeout) and RELEASE_LOCK(name): the context's deadline is the
// timeout, and Release says whether the lock was still held.
func ExampleLocker_Acquire() {
	srv, err := embedded.Run(embedded.TmpfsStore())
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	session1, close1 := process(srv.URL())
	defer close1()
	session2, close2 := process(srv.URL())
	defer close2()
	ctx := context.Background()

	getLock := func(l *kvlock.Locker, name string, timeout time.Duration) (*kvlock.Lock, int) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		lk, err := l.Acquire(ctx, name)
		if errors.Is(err, kvlock.ErrLocked) {
			return nil, 0 // timed out: someone else holds it
		}
		if err != nil {
			log.Fatal(err)
		}
		return lk, 1
	}
	releaseLock := func(lk *kvlock.Lock) int {
		if err := lk.Release(ctx); errors.Is(err, kvlock.ErrNotHeld) {
			return 0
		} else if err != nil {
			log.Fatal(err)
		}
		return 1
	}

	lk, got := getLock(session1, "nightly-report", time.Second)
	fmt.Println("session 1 GET_LOCK:", got)
	_, got = getLock(session2, "nightly-report", 200*time.Millisecond)
	fmt.Println("session 2 GET_LOCK:", got)
	fmt.Println("session 1 RELEASE_LOCK:", releaseLock(lk))
	fmt.Println("session 1 RELEASE_LOCK again:", releaseLock(lk))
	lk2, got := getLock(session2, "nightly-report", time.Second)
	fmt.Println("session 2 GET_LOCK:", got)
	releaseLock(lk2)
	// Output:
	// session 1 GET_LOCK: 1
	// session 2 GET_LOCK: 0
	// session 1 RELEASE_LOCK: 1
	// session 1 RELEASE_LOCK again: 0
	// session 2 GET_LOCK: 1
}

// A pool of locks keyed by object id: Do waits for the object's lock (watching it,
// not polling), runs the function and releases the lock.
func ExampleLocker_Do() {
	srv, err := embedded.Run(embedded.TmpfsStore())
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	l, closeConn := process(srv.URL())
	defer closeConn()
	ctx := context.Background()

	var (
		mu       sync.Mutex
		balances = map[string]int{}
		wg       sync.WaitGroup
	)
	deposit := func(account string, amount int) {
		defer wg.Done()
		err := l.Do(ctx, "account/"+account, func(ctx context.Context, token uint64) error {
			mu.Lock() // only for the race detector: the lock already serialises this
			b := balances[account]
			mu.Unlock()
			time.Sleep(time.Millisecond) // read-modify-write, protected by the lock
			mu.Lock()
			balances[account] = b + amount
			mu.Unlock()
			return nil
		}, kvlock.TTL(2*time.Second))
		if err != nil {
			log.Fatal(err)
		}
	}
	for range 10 {
		wg.Add(2)
		go deposit("alice", 10)
		go deposit("bob", 1)
	}
	wg.Wait()
	fmt.Println("alice:", balances["alice"], "bob:", balances["bob"])
	// Output:
	// alice: 100 bob: 10
}

// store is a resource that checks fencing tokens: it refuses a write carrying a
// token lower than one it has already accepted.
type store struct {
	mu      sync.Mutex
	highest uint64
	value   string
}

func (s *store) Write(token uint64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highest {
		return fmt.Errorf("stale token %d (highest seen %d)", token, s.highest)
	}
	s.highest, s.value = token, value
	return nil
}

// A fencing token checked by the protected resource: a holder that was paused past
// its lease (and superseded) cannot overwrite the new holder's work.
func ExampleLock_Token() {
	srv, err := embedded.Run(embedded.TmpfsStore())
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	slow, close1 := process(srv.URL())
	defer close1()
	fast, close2 := process(srv.URL())
	defer close2()
	ctx := context.Background()
	var s store

	old, err := slow.Acquire(ctx, "config", kvlock.TTL(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	// The slow holder loses its connection (or freezes) before writing...
	close1()
	<-old.Lost()
	// ...and another process gets the lock and writes.
	lk, err := fast.Acquire(ctx, "config", kvlock.TTL(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("new holder:", s.Write(lk.Token(), "v2"))
	// When the old holder finally writes, the store refuses its older token.
	fmt.Println("old holder:", s.Write(old.Token(), "v1") != nil)
	fmt.Println("value:", s.value)
	if err := lk.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// new holder: <nil>
	// old holder: true
	// value: v2
}

// A rate limit shared by several processes: at most 3 requests per second to an
// external API, whichever process makes them.
func ExampleLocker_Limiter() {
	srv, err := embedded.Run(embedded.TmpfsStore())
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	var (
		mu      sync.Mutex
		allowed []string
		wg      sync.WaitGroup
	)
	for _, name := range []string{"proc-a", "proc-b", "proc-c"} {
		l, closeConn := process(srv.URL())
		defer closeConn()
		lim, err := l.Limiter(ctx, "github-api", 3, time.Second)
		if err != nil {
			log.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 { // 12 attempts in all, well within one window
				ok, retryAfter, err := lim.Allow(ctx)
				if err != nil {
					log.Fatal(err)
				}
				if ok {
					mu.Lock()
					allowed = append(allowed, name)
					mu.Unlock()
				} else if retryAfter <= 0 || retryAfter > time.Second {
					log.Fatalf("retry hint %s", retryAfter)
				}
			}
		}()
	}
	wg.Wait()
	sort.Strings(allowed)
	fmt.Println("permits granted:", len(allowed))
	// Output:
	// permits granted: 3
}

// Semaphore: at most two concurrent exports across all processes.
func ExampleSemaphore() {
	srv, err := embedded.Run(embedded.TmpfsStore())
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	l, closeConn := process(srv.URL())
	defer closeConn()
	ctx := context.Background()
	sem, err := l.Semaphore("exports", 2)
	if err != nil {
		log.Fatal(err)
	}
	a, _ := sem.TryAcquire(ctx)
	b, _ := sem.TryAcquire(ctx)
	_, err = sem.TryAcquire(ctx)
	fmt.Println("third:", errors.Is(err, kvlock.ErrLocked))
	fmt.Println("release:", a.Release(ctx), b.Release(ctx))
	// Output:
	// third: true
	// release: <nil> <nil>
}
