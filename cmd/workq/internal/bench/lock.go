package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/kvlock"
)

// LockUncontended measures one acquire plus one release of a free lock, n times each
// side, interleaved: kvlock Acquire+Release against the raw KV equivalent, Create
// (with a per-key TTL, as a lock needs) then Delete on the revision created.
func LockUncontended(ctx context.Context, env Env, n int) (Latency, error) {
	return lockUncontended(ctx, env, n, "lock acquire+release", rawKVLock)
}

// LockUncontendedMinimal is LockUncontended against the least a raw client can do
// for an acquire and a release: a publish expecting the key's last revision, with a
// per-message TTL, then a purge marker expecting the revision written. It is what
// kvlock sends when it re-acquires a name it released, so the ratio is kvlock's own
// bookkeeping; the KV API (LockUncontended's raw side) costs more round trips.
func LockUncontendedMinimal(ctx context.Context, env Env, n int) (Latency, error) {
	return lockUncontended(ctx, env, n, "lock acquire+release vs CAS", rawMinimalLock)
}

// rawLock returns the raw side's acquire+release of the lock bucket called bucket,
// on kv or its stream's subjects through js.
type rawLock func(js jetstream.JetStream, kv jetstream.KeyValue, bucket string) func(ctx context.Context) error

// lockUncontended runs kvlock Acquire+Release and raw's, interleaved, n times each
// after a warm-up, on a lock bucket of its own.
func lockUncontended(ctx context.Context, env Env, n int, scenario string, raw rawLock) (Latency, error) {
	res := Latency{Scenario: scenario, N: n}
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
	rawOnce := raw(js, kv, bucket)
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
		if err := rawOnce(ctx); err != nil {
			return res, fmt.Errorf("raw: %w", err)
		}
		t2 := time.Now()
		if i >= warm {
			wl, rl = append(wl, t1.Sub(t0)), append(rl, t2.Sub(t1))
		}
	}
	res.Workq, res.Raw = percentiles(wl), percentiles(rl)
	return res, nil
}

// rawKVLock is an acquire+release on the KV API: Create (which, over the delete
// marker the last release left, fails, reads the key and updates it), then Delete on
// the revision created.
func rawKVLock(_ jetstream.JetStream, kv jetstream.KeyValue, _ string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		rev, err := kv.Create(ctx, "raw-bench", []byte("x"), jetstream.KeyTTL(10*time.Second))
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		if err := kv.Delete(ctx, "raw-bench", jetstream.LastRevision(rev)); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		return nil
	}
}

// rawMinimalLock is an acquire+release in two publishes on the bucket's subject: the
// value, expecting the revision of the last release (none at first) and with a TTL,
// then a purge marker expecting the value's revision (kept one minute, as kvlock
// keeps its markers). The marker's revision is expected by the next acquire.
func rawMinimalLock(js jetstream.JetStream, _ jetstream.KeyValue, bucket string) func(ctx context.Context) error {
	subj := "$KV." + bucket + ".raw-min"
	var last uint64
	return func(ctx context.Context) error {
		m := &nats.Msg{Subject: subj, Data: []byte("x"), Header: nats.Header{}}
		pa, err := js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(last), jetstream.WithMsgTTL(10*time.Second))
		if err != nil {
			return fmt.Errorf("acquire: %w", err)
		}
		d := nats.NewMsg(subj)
		d.Header.Set("KV-Operation", "PURGE")
		d.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
		pa, err = js.PublishMsg(ctx, d, jetstream.WithExpectLastSequencePerSubject(pa.Sequence), jetstream.WithMsgTTL(time.Minute))
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		last = pa.Sequence
		return nil
	}
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
