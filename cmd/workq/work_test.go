package main

import (
	"testing"
	"time"

	"github.com/workq/workq/consumer"
)

// workWith is valid work flags (the defaults) changed by change.
func workWith(change func(f *workFlags)) *workFlags {
	f := &workFlags{
		queue: "q", argv: []string{"true"},
		concurrency: 1, ackWait: consumer.DefaultAckWait, maxAttempts: consumer.DefaultMaxAttempts, drainTimeout: consumer.DefaultDrainTimeout,
		backoff: consumer.DefaultBackoffBase, backoffMax: consumer.DefaultBackoffLimit, permanentExit: permanentExitDefault,
		killGrace: 5 * time.Second, maxResult: 512 << 10,
	}
	change(f)
	return f
}

func TestWorkValidate(t *testing.T) {
	t.Parallel()
	const durations = "durations must be ≥ 0, and --backoff-max ≥ --backoff"
	checkValidate(t, []validateCase{
		{"defaults", workWith(func(*workFlags) {}), ""},
		{"no timeout, no backoff, no result", workWith(func(f *workFlags) { f.timeout, f.backoff, f.maxResult = 0, 0, 0 }), ""},
		{"prefetch 0", workWith(func(f *workFlags) { f.prefetch, f.prefetchSet = 0, true }), ""},
		{"permanent exit 255", workWith(func(f *workFlags) { f.permanentExit = 255 }), ""},
		{"concurrency 0", workWith(func(f *workFlags) { f.concurrency = 0 }), "--concurrency 0: want ≥ 1"},
		{"max attempts 0", workWith(func(f *workFlags) { f.maxAttempts = 0 }), "--max-attempts 0: want ≥ 1"},
		{"ack wait below 100ms", workWith(func(f *workFlags) { f.ackWait = 99 * time.Millisecond }), "--ack-wait 99ms: want at least 100ms"},
		{"negative timeout", workWith(func(f *workFlags) { f.timeout = -time.Second }), durations},
		{"negative drain timeout", workWith(func(f *workFlags) { f.drainTimeout = -time.Second }), durations},
		{"negative backoff", workWith(func(f *workFlags) { f.backoff = -time.Second }), durations},
		{"backoff max below backoff", workWith(func(f *workFlags) { f.backoffMax = 500 * time.Millisecond }), durations},
		{"negative kill grace", workWith(func(f *workFlags) { f.killGrace = -time.Second }), durations},
		{"permanent exit 0", workWith(func(f *workFlags) { f.permanentExit = 0 }), "--permanent-exit 0: want 1 to 255"},
		{"permanent exit 256", workWith(func(f *workFlags) { f.permanentExit = 256 }), "--permanent-exit 256: want 1 to 255"},
		{"negative max result", workWith(func(f *workFlags) { f.maxResult = -1 }), "--max-result -1: want ≥ 0"},
		{"negative prefetch", workWith(func(f *workFlags) { f.prefetch, f.prefetchSet = -1, true }), "--prefetch -1: want ≥ 0"},
		{"metrics address", workWith(func(f *workFlags) { f.metricsAddr = "nope" }), `--metrics-addr "nope": want host:port or :port (address nope: missing port in address)`},
	})
}

// validate makes a --metrics-addr without a host listen on loopback.
func TestWorkValidateMetricsAddr(t *testing.T) {
	t.Parallel()
	f := workWith(func(f *workFlags) { f.metricsAddr = ":9464" })
	if err := f.validate(); err != nil || f.metricsListen != "127.0.0.1:9464" {
		t.Errorf("--metrics-addr :9464: validate() = %v, listen on %q; want nil, 127.0.0.1:9464", err, f.metricsListen)
	}
}
