package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The server indexes a stream's messages by subject; these read that index for the
// raw keys under a prefix without reading their values, as the counts of a queue's
// sequences need (internal/workflow: SequenceBacklog). DeleteKey's markers are
// there until they expire, a second or two. They use only the store's JS and Bucket.

// KeysUnder calls each with every raw key under prefix (a key prefix ending in ".",
// e.g. "==.next.") that holds a message, a marker too, in key order; it returns how
// many there are. The server lists up to 100 000 keys per request; a listing taken
// while keys come and go may miss or repeat one at a page's edge.
func (s Store) KeysUnder(ctx context.Context, prefix string, each func(key string)) (int, error) {
	full := "$KV." + s.Bucket + "."
	filter := full + prefix + ">"
	for offset := 0; ; {
		req, err := json.Marshal(struct {
			Filter string `json:"subjects_filter"`
			Offset int    `json:"offset,omitempty"`
		}{filter, offset})
		if err != nil {
			return 0, err
		}
		reply, err := s.JS.Conn().RequestWithContext(ctx, apiPrefix(s.JS)+"STREAM.INFO.KV_"+s.Bucket, req)
		if err != nil {
			return 0, fmt.Errorf("keys under %q: %w", prefix, err)
		}
		var resp struct {
			Error *jetstream.APIError `json:"error,omitempty"`
			Total int                 `json:"total"`
			State struct {
				Subjects map[string]uint64 `json:"subjects"`
			} `json:"state"`
		}
		if err := json.Unmarshal(reply.Data, &resp); err != nil {
			return 0, fmt.Errorf("keys under %q: %w", prefix, err)
		}
		if resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeStreamNotFound {
			return 0, nil // no bucket, no keys
		}
		if resp.Error != nil {
			return 0, fmt.Errorf("keys under %q: %w", prefix, resp.Error)
		}
		for subj := range resp.State.Subjects {
			each(strings.TrimPrefix(subj, full))
		}
		offset += len(resp.State.Subjects)
		if len(resp.State.Subjects) == 0 || offset >= resp.Total {
			return resp.Total, nil
		}
	}
}

// KeyEntry is a raw key's value as FirstKeyUnder reads it: the key, the value, when
// the stream's leader wrote it (server time) and its revision.
type KeyEntry struct {
	Key   string
	Value []byte
	At    time.Time
	Rev   uint64
}

// FirstKeyUnder reads the oldest value (by revision), from revision from on, of the
// raw keys under prefix that is not a marker: ErrNotFound when there is none. It makes
// one direct get, one more per marker it steps over. Read from revision 1, then from
// each entry's Rev+1, it visits the live keys oldest write first.
func (s Store) FirstKeyUnder(ctx context.Context, prefix string, from uint64) (KeyEntry, error) {
	full := "$KV." + s.Bucket + "."
	for seq := max(from, 1); ; {
		req, err := json.Marshal(struct {
			Seq  uint64 `json:"seq"`
			Next string `json:"next_by_subj"`
		}{seq, full + prefix + ">"})
		if err != nil {
			return KeyEntry{}, err
		}
		m, err := s.JS.Conn().RequestWithContext(ctx, apiPrefix(s.JS)+"DIRECT.GET.KV_"+s.Bucket, req)
		if err != nil {
			return KeyEntry{}, fmt.Errorf("first key under %q: %w", prefix, err)
		}
		if status := m.Header.Get("Status"); status == "404" {
			return KeyEntry{}, ErrNotFound
		} else if status != "" {
			return KeyEntry{}, fmt.Errorf("first key under %q: direct get: %s %s", prefix, status, m.Header.Get("Description"))
		}
		var n uint64
		if _, err := fmt.Sscan(m.Header.Get(jetstream.SequenceHeader), &n); err != nil || n < seq {
			return KeyEntry{}, errors.New("first key under " + prefix + ": direct get answered without a sequence")
		}
		if isMarkerHeader(m.Header) {
			seq = n + 1
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
		if err != nil {
			return KeyEntry{}, fmt.Errorf("first key under %q: its time: %w", prefix, err)
		}
		return KeyEntry{Key: strings.TrimPrefix(m.Header.Get(jetstream.SubjectHeader), full), Value: m.Data, At: at, Rev: n}, nil
	}
}

// isMarkerHeader reports whether a message with header h is a delete, purge or
// expiry marker rather than a value.
func isMarkerHeader(h nats.Header) bool {
	return h.Get("KV-Operation") != "" || h.Get(jetstream.MarkerReasonHeader) != ""
}
