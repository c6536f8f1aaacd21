package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/kvlock"
)

// LockUncontended measures one acquire plus one release of a free lock, n times each
// side, interleaved: kvlock Acquire+Release against the raw KV equivalent, Create
// (with a per-key TTL, as a lock needs) then Delete on the revision created.
func LockUncontended(ctx context.Context, env Env, n int) (Latency, error) {
	res := Latency{Scenario: "lock acquire+release", N: n}
	js := env.JS
	bucket := queueName("BENCH_LOCKS")
	l, err := kvlock.New(ctx, js, kvlock.Bucket(bucket), kvlock.Replicas(env.replicas()))
	if err != nil {
		return res, err
	}
	defer func() { _ = js.DeleteKeyValue(context.WithoutCancel(ctx), bucket) }()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return res, err
	}
	const warm = 20
	var wl, rl []time.Duration
	for i := range n + warm {
		t0 := time.Now()
		lk, err := l.Acquire(ctx, "bench")
		if err != nil {
			return res, err
		}
		if err := lk.Release(ctx); err != nil {
			return res, err
		}
		t1 := time.Now()
		rev, err := kv.Create(ctx, "raw-bench", []byte("x"), jetstream.KeyTTL(10*time.Second))
		if err != nil {
			return res, fmt.Errorf("raw create: %w", err)
		}
		if err := kv.Delete(ctx, "raw-bench", jetstream.LastRevision(rev)); err != nil {
			return res, fmt.Errorf("raw delete: %w", err)
		}
		t2 := time.Now()
		if i >= warm {
			wl, rl = append(wl, t1.Sub(t0)), append(rl, t2.Sub(t1))
		}
	}
	res.Workq, res.Raw = percentiles(wl), percentiles(rl)
	return res, nil
}

// LockHandoff measures contended handoff: 4 holders, each on its own connection,
// loop acquire → 200µs of work → release on one name until n grants have been made;
// a sample is the time from a holder's release to the next holder's grant, for
// grants to a holder that was already waiting. The raw equivalent: the same loop
// with a KV Create, and on conflict a watcher on the key that creates it again when
// the key is deleted. The holders connect with env.Dial to env.URL (on a cluster, to
// any node).
func LockHandoff(ctx context.Context, env Env, n int) (Latency, error) {
	res := Latency{Scenario: "lock handoff (4 contenders)", N: n}
	js := env.JS
	bucket := queueName("BENCH_LOCKS")
	const holders = 4
	lockers := make([]*kvlock.Locker, holders)
	kvs := make([]jetstream.KeyValue, holders)
	for i := range holders {
		nc, err := env.dial(ctx, env.url())
		if err != nil {
			return res, err
		}
		defer nc.Close()
		hjs, err := jetstream.New(nc)
		if err != nil {
			return res, err
		}
		if lockers[i], err = kvlock.New(ctx, hjs, kvlock.Bucket(bucket), kvlock.Replicas(env.replicas())); err != nil {
			return res, err
		}
		if kvs[i], err = hjs.KeyValue(ctx, bucket); err != nil {
			return res, err
		}
	}
	defer func() { _ = js.DeleteKeyValue(context.WithoutCancel(ctx), bucket) }()
	per := max(n/holders, 2)
	var wl, rl []time.Duration
	// Alternate rounds of 8 grants per holder so both sides see the same machine.
	for done := 0; done < per; done += 8 {
		k := min(8, per-done)
		lats, err := handoffRound(ctx, holders, k, func(ctx context.Context, i int) (func(context.Context) error, error) {
			lk, err := lockers[i].Acquire(ctx, "handoff")
			if err != nil {
				return nil, err
			}
			return lk.Release, nil
		})
		if err != nil {
			return res, err
		}
		wl = append(wl, lats...)
		lats, err = handoffRound(ctx, holders, k, func(ctx context.Context, i int) (func(context.Context) error, error) {
			return rawLockAcquire(ctx, kvs[i], "raw-handoff")
		})
		if err != nil {
			return res, fmt.Errorf("raw: %w", err)
		}
		rl = append(rl, lats...)
	}
	res.N = len(wl)
	res.Workq, res.Raw = percentiles(wl), percentiles(rl)
	return res, nil
}

// handoffRound runs k grants per holder and returns the handoff latencies observed
// (grants that followed a release while the grantee waited).
func handoffRound(ctx context.Context, holders, k int, acquire func(ctx context.Context, i int) (func(context.Context) error, error)) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var (
		mu         sync.Mutex
		releasedAt time.Time
		lats       []time.Duration
		wg         sync.WaitGroup
		errs       = make([]error, holders)
	)
	for i := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range k {
				start := time.Now()
				rel, err := acquire(ctx, i)
				if err != nil {
					errs[i] = err
					return
				}
				got := time.Now()
				mu.Lock()
				if !releasedAt.IsZero() && releasedAt.After(start) {
					lats = append(lats, got.Sub(releasedAt))
				}
				mu.Unlock()
				time.Sleep(200 * time.Microsecond) // the protected work
				mu.Lock()
				releasedAt = time.Now()
				mu.Unlock()
				if err := rel(ctx); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return lats, errors.Join(errs...)
}

// rawLockAcquire is a waiting lock written directly on the KV API: Create, and on
// conflict watch the key and try again when it is deleted. A conflict is classified
// as a careful raw user must on a cluster (jserr.IsConflict).
func rawLockAcquire(ctx context.Context, kv jetstream.KeyValue, key string) (func(context.Context) error, error) {
	for {
		rev, err := kv.Create(ctx, key, []byte("x"), jetstream.KeyTTL(10*time.Second))
		if err == nil {
			return func(ctx context.Context) error { return kv.Delete(ctx, key, jetstream.LastRevision(rev)) }, nil
		}
		if !jserr.IsConflict(err) { // ErrKeyExists; on a replicated bucket, also error 10164
			return nil, err
		}
		w, err := kv.Watch(ctx, key)
		if err != nil {
			return nil, err
		}
		for e := range w.Updates() {
			if e != nil && e.Operation() != jetstream.KeyValuePut {
				break
			}
		}
		_ = w.Stop()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}
