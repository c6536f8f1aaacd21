package consumer

import (
	"testing"
	"time"
)

// The adaptive pull buffer starts at Concurrency, deepens to hold about
// bufferedWork of work when jobs are short (up to maxAutoPrefetch), and shrinks back
// to Concurrency when they get long. Prefetch pins it.
func TestPullBufferFollowsHandlers(t *testing.T) {
	w := &Worker{cfg: config{concurrency: 8, ackWait: 30 * time.Second}}
	p := w.newPuller()
	if got := p.want(); got != 8 {
		t.Fatalf("before any job: %d, want Concurrency 8", got)
	}
	for range 50 {
		p.observe(10 * time.Microsecond)
	}
	if got := p.want(); got != maxAutoPrefetch {
		t.Fatalf("10µs jobs: %d, want the cap %d", got, maxAutoPrefetch)
	}
	for range 50 {
		p.observe(time.Millisecond)
	}
	if got, want := p.want(), 8*50; got < want*9/10 || got > want*11/10 {
		t.Fatalf("1ms jobs: %d, want about %d (50ms of work on 8 slots)", got, want)
	}
	for range 100 {
		p.observe(2 * time.Second)
	}
	if got := p.want(); got != 8 {
		t.Fatalf("2s jobs: %d, want Concurrency 8", got)
	}

	// Large jobs: no more than about maxBufferedBytes of them, however fast.
	big := (&Worker{cfg: config{concurrency: 8, ackWait: 30 * time.Second}}).newPuller()
	big.observe(10 * time.Microsecond)
	average(&big.jobSize, 1<<20)
	if got := big.want(); got != maxBufferedBytes>>20 {
		t.Fatalf("1 MiB jobs: %d, want %d", got, maxBufferedBytes>>20)
	}
	huge := (&Worker{cfg: config{concurrency: 8, ackWait: 30 * time.Second}}).newPuller()
	huge.observe(10 * time.Microsecond)
	average(&huge.jobSize, 8<<20)
	if got := huge.want(); got != 8 {
		t.Fatalf("8 MiB jobs: %d, want Concurrency 8, the floor", got)
	}

	pinned := (&Worker{cfg: config{concurrency: 8, prefetch: 3, ackWait: 30 * time.Second}}).newPuller()
	pinned.observe(time.Microsecond)
	if got := pinned.want(); got != 3 {
		t.Fatalf("Prefetch(3): %d", got)
	}
}
