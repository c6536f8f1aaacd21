package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/kvlock"
)

// Limiter measures rate-limiter decisions per second on the admitted path: n
// Limiter.Allow calls from 16 goroutines (a limit high enough that every call is
// admitted, a 1 s window), against the raw equivalent, a plain js.Publish from 16
// goroutines to a stream of the same shape (memory, MaxMsgsPerSubject, Discard New
// per subject, MaxAge = window). Interleaved in rounds.
func Limiter(ctx context.Context, env Env, n int) (Pair, error) {
	const goroutines = 16
	res := Pair{Scenario: fmt.Sprintf("limiter allow x%d", goroutines), N: n}
	js := env.JS
	bucket := queueName("BENCH_LOCKS")
	l, err := kvlock.New(ctx, js, kvlock.Bucket(bucket), kvlock.Replicas(env.replicas()))
	if err != nil {
		return res, err
	}
	name := queueName("bench")
	lim, err := l.Limiter(ctx, name, 1<<30, time.Second)
	if err != nil {
		return res, err
	}
	rawName := queueName("BENCH_RAW_LIMIT")
	rawSubj := "bench.limit." + rawName
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: rawName, Subjects: []string{rawSubj}, Storage: jetstream.MemoryStorage, Replicas: env.replicas(),
		MaxMsgsPerSubject: 1 << 30, MaxAge: time.Second, Discard: jetstream.DiscardNew, DiscardNewPerSubject: true,
		Duplicates: time.Second, AllowDirect: true,
	}); err != nil {
		return res, err
	}
	defer func() {
		c := context.WithoutCancel(ctx)
		_ = js.DeleteStream(c, rawName)
		_ = js.DeleteStream(c, "WORKQ_LIMIT_"+name)
		_ = js.DeleteKeyValue(c, bucket)
	}()

	par := func(k int, op func() error) (time.Duration, error) {
		var wg sync.WaitGroup
		errs := make([]error, goroutines)
		start := time.Now()
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < k; i += goroutines {
					if err := op(); err != nil {
						errs[g] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		return time.Since(start), errors.Join(errs...)
	}
	var tw, tr time.Duration
	for done := 0; done < n; {
		k := min(n-done, max(n/10, goroutines))
		d, err := par(k, func() error {
			_, err := js.Publish(ctx, rawSubj, nil)
			return err
		})
		if err != nil {
			return res, fmt.Errorf("raw publish: %w", err)
		}
		tr += d
		d, err = par(k, func() error {
			ok, _, err := lim.Allow(ctx)
			if err == nil && !ok {
				err = errors.New("limiter rejected a permit under its limit")
			}
			return err
		})
		if err != nil {
			return res, err
		}
		tw += d
		done += k
	}
	res.Workq, res.Raw = rate(n, tw), rate(n, tr)
	return res, nil
}
