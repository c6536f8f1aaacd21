package kvlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/workq/workq/testenv"
)

// Every benchmark runs the raw JetStream equivalent in the same process, interleaved
// with the kvlock operation so both see the same machine, and reports the ratio
// (≥ 1: kvlock is as fast or faster).

// Uncontended acquire+release against raw KV create+delete (the kv API, which
// re-reads the key when a delete marker is there) and against the minimal raw
// protocol (a compare-and-set publish, then a compare-and-delete publish).
func BenchmarkAcquireRelease(b *testing.B) {
	env := testenv.Start(b)
	l := newTestLocker(b, env.JetStream(b))
	kv, js := l.kv, l.js
	ctx := context.Background()
	var lockT, kvT, minT time.Duration
	var lastMin uint64
	n := 0
	for b.Loop() {
		t0 := time.Now()
		lk, err := l.Acquire(ctx, "bench-lock")
		if err != nil {
			b.Fatal(err)
		}
		if err := lk.Release(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		rev, err := kv.Create(ctx, "bench-raw", []byte("x"), jetstream.KeyTTL(10*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		if err := kv.Delete(ctx, "bench-raw", jetstream.LastRevision(rev)); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		rawMinimal(b, js, "$KV."+DefaultBucket+".bench-min", &lastMin)
		t3 := time.Now()
		lockT += t1.Sub(t0)
		kvT += t2.Sub(t1)
		minT += t3.Sub(t2)
		n++
	}
	b.ReportMetric(float64(lockT.Nanoseconds())/float64(n), "kvlock-ns/op")
	b.ReportMetric(float64(kvT.Nanoseconds())/float64(n), "rawkv-ns/op")
	b.ReportMetric(float64(minT.Nanoseconds())/float64(n), "rawmin-ns/op")
	b.ReportMetric(float64(kvT)/float64(lockT), "x-vs-rawkv")
	b.ReportMetric(float64(minT)/float64(lockT), "x-vs-rawmin")
}

// rawMinimal is the least a client can do for an acquire+release: publish with the
// expected last revision and a TTL, then publish a purge marker expecting the new one.
func rawMinimal(b *testing.B, js jetstream.JetStream, subj string, last *uint64) {
	ctx := context.Background()
	m := &nats.Msg{Subject: subj, Data: []byte("x"), Header: nats.Header{}}
	pa, err := js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(*last), jetstream.WithMsgTTL(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	d := nats.NewMsg(subj)
	d.Header.Set("KV-Operation", "PURGE")
	d.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	pa, err = js.PublishMsg(ctx, d, jetstream.WithExpectLastSequencePerSubject(pa.Sequence), jetstream.WithMsgTTL(time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	*last = pa.Sequence
}

// Handoff latency under contention: 4 connections loop acquire/release on one name;
// latency is from a holder calling Release to the next holder being granted. The raw
// equivalent: waiters watch the key with the kv API and Create when it is deleted.
func BenchmarkHandoff(b *testing.B) {
	env := testenv.Start(b)
	const workers = 4
	lockers := make([]*Locker, workers)
	for i := range lockers {
		lockers[i] = newTestLocker(b, env.JetStream(b))
	}
	var kvLat, rawLat []time.Duration
	for b.Loop() {
		kvLat = append(kvLat, handoffRound(b, workers, func(i int, ctx context.Context) (func(context.Context) error, error) {
			lk, err := lockers[i].Acquire(ctx, "handoff")
			if err != nil {
				return nil, err
			}
			return lk.Release, nil
		})...)
		rawLat = append(rawLat, handoffRound(b, workers, func(i int, ctx context.Context) (func(context.Context) error, error) {
			return rawAcquire(ctx, lockers[i].kv, "handoff-raw")
		})...)
	}
	p := func(ls []time.Duration, q float64) time.Duration {
		slices.Sort(ls)
		return ls[int(float64(len(ls)-1)*q)]
	}
	kp50, kp99 := p(kvLat, .5), p(kvLat, .99)
	rp50, rp99 := p(rawLat, .5), p(rawLat, .99)
	b.ReportMetric(float64(kp50.Microseconds())/1000, "kvlock-p50-ms")
	b.ReportMetric(float64(kp99.Microseconds())/1000, "kvlock-p99-ms")
	b.ReportMetric(float64(rp50.Microseconds())/1000, "rawkv-p50-ms")
	b.ReportMetric(float64(rp99.Microseconds())/1000, "rawkv-p99-ms")
	b.ReportMetric(float64(rp50)/float64(kp50), "x-p50-vs-rawkv")
}

// handoffRound runs 8 contended grants per worker and returns the handoff
// latencies observed (grants that followed a release while the grantee waited).
func handoffRound(b *testing.B, workers int, acquire func(i int, ctx context.Context) (func(context.Context) error, error)) []time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		mu         sync.Mutex
		releasedAt time.Time
		lats       []time.Duration
		wg         sync.WaitGroup
	)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 8 {
				start := time.Now()
				rel, err := acquire(i, ctx)
				if err != nil {
					b.Error(err)
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
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return lats
}

// rawAcquire is a waiting lock written directly on the kv API: Create, and on
// conflict watch the key and retry when it is deleted.
func rawAcquire(ctx context.Context, kv jetstream.KeyValue, key string) (func(context.Context) error, error) {
	for {
		rev, err := kv.Create(ctx, key, []byte("x"), jetstream.KeyTTL(10*time.Second))
		if err == nil {
			return func(ctx context.Context) error { return kv.Delete(ctx, key, jetstream.LastRevision(rev)) }, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
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
		w.Stop()
	}
}

// Limiter Allow (admitted path) against a raw publish to a stream of the same shape.
func BenchmarkLimiterAllow(b *testing.B) {
	env := testenv.Start(b)
	l := newTestLocker(b, env.JetStream(b))
	ctx := context.Background()
	lim, err := l.Limiter(ctx, "bench", 1<<30, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "RAW_LIMIT", Subjects: []string{"raw.limit"}, Storage: jetstream.MemoryStorage,
		MaxMsgsPerSubject: 1 << 30, MaxAge: time.Second, Discard: jetstream.DiscardNew, DiscardNewPerSubject: true,
	}); err != nil {
		b.Fatal(err)
	}
	var limT, rawT time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		ok, _, err := lim.Allow(ctx)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		t1 := time.Now()
		if _, err := l.js.Publish(ctx, "raw.limit", nil); err != nil {
			b.Fatal(err)
		}
		rawT += time.Since(t1)
		limT += t1.Sub(t0)
		n++
	}
	b.ReportMetric(float64(n)/limT.Seconds(), "allow/s")
	b.ReportMetric(float64(n)/rawT.Seconds(), "rawpub/s")
	b.ReportMetric(float64(rawT)/float64(limT), "x-vs-raw")
}
