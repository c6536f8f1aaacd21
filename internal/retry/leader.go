package retry

import (
	"context"
	"time"

	"github.com/workq/workq/internal/jserr"
)

// A stream, bucket or consumer has no leader for a moment after it is created and
// while its replicas elect a new one: 250 ms after a step-down, several seconds after
// a crash, as long as a quorum is missing. Meanwhile a publish to it gets "no
// responders" at once, and a request to its API (a message get, a purge) gets no
// answer at all. Every read and write workq makes of a queue's or a bucket's objects
// waits that out, up to its context's end, through UntilLeader (writes) or Do
// (reads and requests that may be repeated, each try bounded so that one left
// unanswered is sent again).

// UntilLeader runs the write op, and runs it again for as long as it fails because
// no leader received it (jserr.NoLeader). Such a request changed nothing, so
// repeating it cannot store twice, compare-and-sets included. It waits 25 ms between
// tries, doubling up to 500 ms, until ctx ends; any other result of op, success or
// error, is returned as it is. A write that got no reply at all (a timeout) may have
// landed: that is for the caller to resolve, by reading.
func UntilLeader(ctx context.Context, op func() error) error {
	delay := 25 * time.Millisecond
	for {
		err := op()
		if !jserr.NoLeader(err) {
			return err
		}
		if err := pause(ctx, &delay, err); err != nil {
			return err
		}
	}
}
