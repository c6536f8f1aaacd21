package consumer_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/testenv"
)

// A claim that fails for good — here the records' stream refuses every write, its
// message size limit set below any record — runs nothing and does not loop: the job
// is put back with a backoff that doubles with each delivery, the failures are
// counted, and the worker turns unhealthy with the reason; once writes work again the
// job runs and the worker is healthy. Before, each failure was put back after the
// first retry's backoff for ever, uncounted in Health, which stayed nil.
func TestClaimThatFailsBacksOffAndTurnsUnhealthy(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "claimrefused"
	p := newProducer(t, js, q)
	var ran atomic.Int32
	w := newWorker(t, js, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error {
		ran.Add(1)
		return nil
	}), consumer.AckWait(2*time.Second), consumer.Backoff(func(int) time.Duration { return 10 * time.Millisecond }))

	ctx := testenv.Context(t, 20*time.Second)
	records, err := js.Stream(ctx, "KV_WORKQ_"+q+"_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	cfg := records.CachedInfo().Config
	limit := cfg.MaxMsgSize
	cfg.MaxMsgSize = 16
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := p.Enqueue(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testenv.Eventually(t, 10*time.Second, "the worker unhealthy", func() bool {
		err := w.Health()
		return err != nil && strings.Contains(err.Error(), "claiming jobs")
	})
	t.Logf("unhealthy after %s: %v", time.Since(start).Round(time.Millisecond), w.Health())
	// Six seconds of failures: a claim put back after the handler's backoff (10ms)
	// would fail hundreds of times; doubling from 250ms, about five.
	time.Sleep(6 * time.Second)
	if n := w.Stats().Errors; n < 2 || n > 8 {
		t.Fatalf("%d claims failed in 6s; want a few, each after a doubled backoff", n)
	}
	if ran.Load() != 0 {
		t.Fatal("the job ran without a claim")
	}

	cfg.MaxMsgSize = limit
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 90*time.Second, "the job run and the worker healthy", func() bool {
		return w.Stats().Committed == 1 && w.Health() == nil
	})
}
