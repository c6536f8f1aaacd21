package workflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/wireid"
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
// request per 100 000), reads the records of the jobs they wait for (one request per
// 1000) and the oldest link: no scan of the records. A link deleted in the last
// second or two (its marker: record.Store.DeleteKey), like one whose job ended
// that a server's crash brought back, names a job that ended: not counted.
func SequenceBacklog(ctx context.Context, store record.Store) (Backlog, error) {
	type link struct{ key, pred string }
	var links []link
	_, err := store.KeysUnder(ctx, NextPrefix, func(k string) {
		key, pred, ok := strings.Cut(strings.TrimPrefix(k, NextPrefix), ".")
		if id, idOK := wireid.Decode(pred); ok && idOK {
			links = append(links, link{key, id})
		}
	})
	if err != nil {
		return Backlog{}, fmt.Errorf("sequences' backlog: %w", err)
	}
	if len(links) == 0 {
		return Backlog{}, nil
	}
	preds := make([]string, len(links))
	for i, l := range links {
		preds[i] = l.pred
	}
	recs := store.GetMany(ctx, preds)
	live := func(pred string) bool {
		r, ok := recs[pred]
		return !ok || !r.State.Terminal() || r.State == record.Cancelled && len(r.WaitingFor) > 0
	}
	var b Backlog
	keys := map[string]struct{}{}
	for _, l := range links {
		if live(l.pred) {
			b.Jobs++
			keys[l.key] = struct{}{}
		}
	}
	b.Keys = len(keys)
	if b.Jobs == 0 {
		return b, nil
	}
	for from := uint64(0); ; {
		e, err := store.FirstKeyUnder(ctx, NextPrefix, from)
		switch {
		case errors.Is(err, record.ErrNotFound):
			return b, nil // the links went since they were listed
		case err != nil:
			return Backlog{}, fmt.Errorf("sequences' backlog: %w", err)
		}
		_, pred, _ := strings.Cut(strings.TrimPrefix(e.Key, NextPrefix), ".")
		if id, ok := wireid.Decode(pred); ok && live(id) {
			b.Oldest = e.At
			return b, nil
		}
		from = e.Rev + 1
	}
}
