package sim

import (
	"os"
	"sync/atomic"
	"testing"
	"time"
	_ "unsafe" // go:linkname, for the server's access-time clock
)

// The server's access-time clock (package server/ats) is a process-wide cache of
// the time, refreshed every 100ms by a goroutine that the first store to open
// starts. The file store judges message ages by it (MaxAge, per-message TTLs), and
// it stamps messages by time.Now: in a bubble the two must be the same virtual clock,
// or every message looks decades old (the bubble's clock starts in 2000) and the
// server expires the job records under the workers. And the goroutine, started in a
// bubble, selects on a channel made outside it, which keeps the bubble's clock from
// ever moving.
//
// So the simulation holds one reference to the clock for the whole test binary, so
// that the server never starts its goroutine, and ticks it itself inside each bubble
// (tickAccessTime), one bubble at a time.
//
//go:linkname atsUtime github.com/nats-io/nats-server/v2/server/ats.utime
var atsUtime atomic.Int64

//go:linkname atsRefs github.com/nats-io/nats-server/v2/server/ats.refs
var atsRefs atomic.Int64

func TestMain(m *testing.M) {
	atsRefs.Add(1)
	os.Exit(m.Run())
}

// tickAccessTime keeps the server's access-time clock on the bubble's clock until
// stop is closed.
func tickAccessTime(stop <-chan struct{}) {
	atsUtime.Store(time.Now().UnixNano())
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				atsUtime.Store(time.Now().UnixNano())
			case <-stop:
				return
			}
		}
	}()
}
