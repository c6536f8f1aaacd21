package consumer

import (
	"testing"
	"time"

	"github.com/workq/workq/internal/queue"
)

// The adaptive pull buffer holds a delivery for each idle slot and an extra depth:
// none while the handlers' pace is unknown, about bufferedWork of work when jobs are
// short (up to maxAutoPrefetch), none again when they get long. Prefetch pins it.
func TestPullBufferFollowsHandlers(t *testing.T) {
	t.Parallel()
	adaptive := func() *puller {
		return (&Worker{cfg: config{concurrency: 8, ackWait: 30 * time.Second, prefetch: -1}}).newPuller(&source{level: queue.PriorityNormal})
	}
	p := adaptive()
	if got := p.missing(); got != 8 {
		t.Fatalf("before any job: %d, want one for each of the 8 idle slots and no more", got)
	}
	p.held.Store(8)
	if got := p.missing(); got != 0 {
		t.Fatalf("before any job, every slot busy: %d, want 0", got)
	}
	p.held.Store(7)
	if got := p.missing(); got != 1 {
		t.Fatalf("before any job, one slot free: %d, want 1 (a free slot is filled at once)", got)
	}
	p.held.Store(8)
	for range 50 {
		p.observe(10 * time.Microsecond)
	}
	if got := p.missing(); got != maxAutoPrefetch {
		t.Fatalf("10µs jobs: %d, want the cap %d", got, maxAutoPrefetch)
	}
	p.held.Store(3)
	if got := p.missing(); got != 5+maxAutoPrefetch {
		t.Fatalf("10µs jobs, 5 idle slots: %d, want %d", got, 5+maxAutoPrefetch)
	}
	p.held.Store(8 + maxAutoPrefetch - maxAutoPrefetch/4 + 1)
	if got := p.missing(); got != 0 {
		t.Fatalf("10µs jobs, less than a quarter of the buffer missing: %d, want 0 (pulls come in batches)", got)
	}
	p.held.Store(8)
	for range 50 {
		p.observe(time.Millisecond)
	}
	if got, want := p.missing(), 8*50; got < want*9/10 || got > want*11/10 {
		t.Fatalf("1ms jobs: %d, want about %d (50ms of work on 8 slots)", got, want)
	}
	for range 100 {
		p.observe(2 * time.Second)
	}
	if got := p.missing(); got != 0 {
		t.Fatalf("2s jobs, every slot busy: %d, want 0", got)
	}

	// Large jobs: no more than about maxBufferedBytes of them, however fast.
	big := adaptive()
	big.held.Store(8)
	big.observe(10 * time.Microsecond)
	average(&big.jobSize, 1<<20)
	if got := big.missing(); got != maxBufferedBytes>>20 {
		t.Fatalf("1 MiB jobs: %d, want %d", got, maxBufferedBytes>>20)
	}
	huge := adaptive()
	huge.held.Store(8)
	huge.observe(10 * time.Microsecond)
	average(&huge.jobSize, 64<<20)
	if got := huge.missing(); got != 0 {
		t.Fatalf("64 MiB jobs: %d, want 0", got)
	}

	for _, n := range []int{0, 3} {
		pinned := (&Worker{cfg: config{concurrency: 8, prefetch: n, ackWait: 30 * time.Second}}).newPuller(&source{level: queue.PriorityNormal})
		pinned.observe(time.Microsecond)
		pinned.held.Store(8)
		if got := pinned.missing(); got != n {
			t.Fatalf("Prefetch(%d), every slot busy: %d", n, got)
		}
	}
}
