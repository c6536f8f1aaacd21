package workflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/workq/workq/internal/record"
)

// Backlog is how a queue's sequences stand, counted from the server's index of the
// successor links (NextKey) without reading a record: a job waits for the one before
// it in its key exactly while that one's link to it lives.
type Backlog struct {
	// Jobs counts the jobs waiting for the job before them in their key; a job
	// cancelled while it waits counts until that job ends, and a job halted after a
	// dead one (HaltOnDead) does not count: it waits for an operator, not a job.
	Jobs int
	// Keys counts the sequence keys with such a job.
	Keys int
	// Oldest is when the longest waiting of them was enqueued (its link was
	// written); zero when none waits.
	Oldest time.Time
}

// SequenceBacklog counts the jobs of store's queue waiting in their sequences, and
// their keys. It lists the live links' keys, about 60 bytes each from the server (one
// request per 100 000), and reads the oldest link: no record. Deleted links leave no
// marker (record.Store.DeleteKey), so the counts are exact as of the listing.
func SequenceBacklog(ctx context.Context, store record.Store) (Backlog, error) {
	var b Backlog
	keys := map[string]struct{}{}
	n, err := store.KeysUnder(ctx, NextPrefix, func(k string) {
		if key, _, ok := strings.Cut(strings.TrimPrefix(k, NextPrefix), "."); ok {
			keys[key] = struct{}{}
		}
	})
	if err != nil {
		return Backlog{}, fmt.Errorf("sequences' backlog: %w", err)
	}
	b.Jobs, b.Keys = n, len(keys)
	if n == 0 {
		return b, nil
	}
	_, b.Oldest, err = store.FirstKeyUnder(ctx, NextPrefix)
	switch {
	case errors.Is(err, record.ErrNotFound):
		// Only markers: the links went since they were listed.
	case err != nil:
		return Backlog{}, fmt.Errorf("sequences' backlog: %w", err)
	}
	return b, nil
}
