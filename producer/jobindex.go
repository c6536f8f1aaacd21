package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/wireid"
)

// jobIndex is what Jobs and JobCounts know of the queue's job records, kept in
// memory from their first call: each job's id, kind, state, the sequence of the
// message its record is about, and when its record was last written, in the order of
// the records bucket's stream. Each call reads only the records written since the
// last one (the stream from the sequence it stopped at), so a page costs no scan of
// every record: a page of 50 among 1 000 000 records is a walk of the index from its
// newest end and one read of the page's records. The first call reads them all.
//
// The index costs about 130 bytes per record (BenchmarkJobs logs it). It forgets a record whose delete or
// purge marker it reads, and one older than the bucket's age limit (the server
// removed it; records of jobs that wait, written never to expire, stay); a record
// the server removed otherwise is dropped when a page finds it gone.
type jobIndex struct {
	mu      sync.Mutex
	created time.Time        // the bucket stream's creation: another stream, another index
	next    uint64           // the stream sequence to read from
	entries []indexEntry     // by stream sequence; gone entries are holes
	slot    map[string]int32 // job id → its entry
	holes   int
	counts  map[State]int
	kinds   []string          // by number: an entry holds its kind's
	kindOf  map[string]uint32 // kind → its number
	keys    []string          // sequence keys by number, from 1 (0: none)
	keyOf   map[string]uint32
	states  []State // by number, from 1 (0: a hole)
	stateOf map[State]uint8
	// failures counts the failed attempts the index has read in the records'
	// histories of failed attempts (Record.Errors), each once, since it began.
	failures uint64
}

// indexEntry is one record in 48 bytes: its kind, state and sequence key are numbers.
type indexEntry struct {
	id      string
	updated int64  // when the record was written (unix ns)
	msgSeq  uint64 // the sequence of the job message the record is about (Record.Sequence)
	kind    uint32 // in jobIndex.kinds
	seqKey  uint32 // in jobIndex.keys: the job's sequence key; 0 for none
	failed  uint16 // the latest failed attempt its records' histories showed
	state   uint8  // in jobIndex.states; 0: gone
}

// indexedRecord is the part of a record the index reads.
type indexedRecord struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	State    State  `json:"state"`
	Sequence uint64 `json:"sequence"`
	SeqKey   string `json:"sequence_key"`
	Errors   []struct {
		Attempt int `json:"attempt"`
	} `json:"errors"`
}

func newJobIndex() *jobIndex {
	x := &jobIndex{}
	x.reset(time.Time{})
	return x
}

// reset empties the index, for the bucket stream created at created.
func (x *jobIndex) reset(created time.Time) {
	x.created, x.next, x.entries, x.holes, x.failures = created, 1, nil, 0, 0
	x.slot, x.counts = map[string]int32{}, map[State]int{}
	x.kinds, x.kindOf, x.states, x.stateOf = nil, map[string]uint32{}, []State{""}, map[State]uint8{}
	x.keys, x.keyOf = []string{""}, map[string]uint32{"": 0}
}

// catchUp reads the records bucket's stream s from where the index stopped to its
// end, and forgets the records past maxAge (0: no limit). The caller holds x.mu.
func (x *jobIndex) catchUp(ctx context.Context, s jetstream.Stream, bucket string, maxAge time.Duration) error {
	prefix := "$KV." + bucket + "."
	err := queue.ScanFrom(ctx, s, x.next, false, func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
		x.next = md.Sequence.Stream + 1
		key := strings.TrimPrefix(m.Subject(), prefix)
		if strings.HasPrefix(key, "==.") {
			return true // a sequence's link, not a record
		}
		if h := m.Headers(); h.Get("KV-Operation") != "" || h.Get(jetstream.MarkerReasonHeader) != "" {
			if id, ok := wireid.Decode(key); ok {
				x.remove(id)
			}
			return true
		}
		var r indexedRecord
		if json.Unmarshal(m.Data(), &r) != nil || r.ID == "" || wireid.Encode(r.ID) != key {
			return true // not a record workq can read: left out, as before
		}
		x.put(r, md.Timestamp.UnixNano())
		return true
	})
	if err != nil {
		return err
	}
	if maxAge > 0 {
		x.expire(time.Now().Add(-maxAge).UnixNano())
	}
	return nil
}

// put records r, written at updated, as its job's newest record, counting the
// failed attempts its history shows that the job's earlier records did not.
func (x *jobIndex) put(r indexedRecord, updated int64) {
	var seen uint16
	if i, ok := x.slot[r.ID]; ok {
		seen = x.entries[i].failed
	}
	failed := seen
	for _, e := range r.Errors {
		failed = max(failed, uint16(min(max(e.Attempt, 0), 1<<16-1)))
	}
	x.failures += uint64(failed - seen)
	x.remove(r.ID)
	kind, ok := x.kindOf[r.Kind]
	if !ok {
		kind = uint32(len(x.kinds))
		x.kinds = append(x.kinds, r.Kind)
		x.kindOf[r.Kind] = kind
	}
	state, ok := x.stateOf[r.State]
	if !ok {
		if len(x.states) > 255 {
			return // not a state a record has: left out
		}
		state = uint8(len(x.states))
		x.states = append(x.states, r.State)
		x.stateOf[r.State] = state
	}
	key, ok := x.keyOf[r.SeqKey]
	if !ok {
		key = uint32(len(x.keys))
		x.keys = append(x.keys, r.SeqKey)
		x.keyOf[r.SeqKey] = key
	}
	x.slot[r.ID] = int32(len(x.entries))
	x.entries = append(x.entries, indexEntry{id: r.ID, kind: kind, state: state, seqKey: key, failed: failed, updated: updated, msgSeq: r.Sequence})
	x.counts[r.State]++
}

// remove forgets job id's record, if the index has one.
func (x *jobIndex) remove(id string) {
	i, ok := x.slot[id]
	if !ok {
		return
	}
	e := &x.entries[i]
	st := x.states[e.state]
	x.counts[st]--
	if x.counts[st] == 0 {
		delete(x.counts, st)
	}
	e.state = 0
	delete(x.slot, id)
	x.holes++
	if x.holes > 1024 && x.holes > len(x.entries)/2 {
		x.compact()
	}
}

// expire forgets the records written before cutoff, but those of jobs that wait
// (queued or waiting records never expire), as the bucket's age limit removed them.
func (x *jobIndex) expire(cutoff int64) {
	for i := range x.entries {
		e := &x.entries[i]
		if e.updated >= cutoff {
			return // the entries are in write order
		}
		if st := x.states[e.state]; e.state != 0 && st != StateWaiting && st != StateQueued {
			x.remove(e.id)
		}
	}
}

// compact drops the holes.
func (x *jobIndex) compact() {
	live := make([]indexEntry, 0, len(x.entries)-x.holes)
	for _, e := range x.entries {
		if e.state != 0 {
			x.slot[e.id] = int32(len(live))
			live = append(live, e)
		}
	}
	x.entries, x.holes = live, 0
}

// newest returns up to n entries that keep takes, newest first (by write time, as
// the listing orders; the stream's order is the write order).
func (x *jobIndex) newest(n int, keep func(e *indexEntry) bool) []indexEntry {
	var out []indexEntry
	for i := len(x.entries) - 1; i >= 0 && len(out) < n; i-- {
		if e := &x.entries[i]; e.state != 0 && keep(e) {
			out = append(out, *e)
		}
	}
	return out
}

// messageSeq is the sequence of the job message job id's record is about.
func (x *jobIndex) messageSeq(id string) (uint64, bool) {
	i, ok := x.slot[id]
	if !ok {
		return 0, false
	}
	return x.entries[i].msgSeq, true
}

// jobIndex brings the producer's index of the job records up to date and returns it
// locked; unlock releases it.
func (p *Producer) jobIndex(ctx context.Context) (x *jobIndex, unlock func(), err error) {
	p.indexMu.Lock()
	if p.index == nil {
		p.index = newJobIndex()
	}
	x = p.index
	p.indexMu.Unlock()
	x.mu.Lock()
	s, err := p.js.Stream(ctx, "KV_"+p.names.Bucket)
	if err == nil {
		info := s.CachedInfo()
		if !info.Created.Equal(x.created) || info.State.LastSeq+1 < x.next {
			// A bucket made again since the index began (the queue was deleted and
			// created): begin again.
			x.reset(info.Created)
		}
		err = x.catchUp(ctx, s, p.names.Bucket, info.Config.MaxAge)
	}
	if err != nil {
		x.mu.Unlock()
		return nil, nil, err
	}
	return x, x.mu.Unlock, nil
}

// indexedJobs returns up to n jobs of the index that keep takes, newest first, with
// their records as they are now (one read of them all); the index forgets those the
// server no longer has.
func (p *Producer) indexedJobs(ctx context.Context, x *jobIndex, n int, keep func(e *indexEntry) bool) ([]ListedJob, error) {
	for {
		picked := x.newest(n, keep)
		if len(picked) == 0 {
			return nil, nil
		}
		ids := make([]string, len(picked))
		for i, e := range picked {
			ids[i] = e.id
		}
		recs := p.records.GetMany(ctx, ids)
		out := make([]ListedJob, 0, len(picked))
		missing := false
		for _, e := range picked {
			r, ok := recs[e.id]
			if !ok {
				// GetMany leaves out what it could not read as asked: read it alone.
				got, err := p.records.Get(ctx, e.id)
				switch {
				case errors.Is(err, record.ErrNotFound) || errors.Is(err, record.ErrCorrupt):
					x.remove(e.id)
					missing = true
					continue
				case err != nil:
					return nil, err
				}
				r = got
			}
			out = append(out, ListedJob{Record: *publicRecord(r), Updated: time.Unix(0, e.updated)})
		}
		if !missing {
			return out, nil
		}
		// Some were gone: pick again, without them.
	}
}

// JobTally is what JobTally counts.
type JobTally struct {
	// Counts are the queue's jobs that have a record, by state (as JobCounts).
	Counts map[State]int
	// FailedAttempts counts the failed attempts (that a record's history of failed
	// attempts shows) of the records read since the producer's first Jobs,
	// JobCounts or JobTally: its growth between two calls is how many attempts
	// failed meanwhile, each counted once whichever record shows it.
	FailedAttempts uint64
}

// JobTally counts the queue's jobs by state and the failed attempts seen, from the
// index Jobs keeps: it reads only the records written since the producer's last
// call of Jobs, JobCounts or JobTally.
func (p *Producer) JobTally(ctx context.Context) (JobTally, error) {
	if ctx == nil {
		return JobTally{}, errors.New("producer: job tally: nil context")
	}
	x, unlock, err := p.jobIndex(ctx)
	if err != nil {
		return JobTally{}, fmt.Errorf("producer: job tally of queue %s: %w", p.names.Queue, err)
	}
	defer unlock()
	t := JobTally{Counts: make(map[State]int, len(x.counts)), FailedAttempts: x.failures}
	for s, n := range x.counts {
		t.Counts[s] = n
	}
	return t, nil
}

// JobCounts counts the queue's jobs that have a record, by state (queued ones once a
// worker took them or while they wait in a workflow or sequence; running, retrying,
// waiting, done, dead, cancelled), from the index Jobs keeps: it reads only the
// records written since the producer's last Jobs or JobCounts. Jobs no worker has
// taken yet and delayed ones are admin.QueueInfo's Pending and Scheduled.
func (p *Producer) JobCounts(ctx context.Context) (map[State]int, error) {
	if ctx == nil {
		return nil, errors.New("producer: job counts: nil context")
	}
	t, err := p.JobTally(ctx)
	if err != nil {
		return nil, err
	}
	return t.Counts, nil
}
