package producer

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/wireid"
)

// DefaultJobsLimit is how many jobs a page of Jobs holds when JobQuery.Limit is 0.
const DefaultJobsLimit = 100

// JobQuery selects the jobs Jobs lists. The zero value lists every job, newest first,
// DefaultJobsLimit to a page.
type JobQuery struct {
	// State keeps the jobs in this state; "" keeps all.
	State State
	// Kind keeps the jobs of this kind; "" keeps all.
	Kind string
	// Limit is the page size; 0 means DefaultJobsLimit.
	Limit int
	// Cursor continues a listing: the Next of the page before; "" starts at the newest.
	Cursor string
}

// JobPage is one page of Jobs.
type JobPage struct {
	// Jobs are the page's jobs, newest first: by the time of their record's last
	// write, or, for a job without a record (queued or scheduled), of its enqueue.
	Jobs []ListedJob `json:"jobs"`
	// Next is the cursor of the next page; "" when this page is the last.
	Next string `json:"next,omitempty"`
}

// ListedJob is a job as Jobs lists it: its record, and when it last changed.
type ListedJob struct {
	Record
	// Updated is when the record was last written, or the job enqueued if it has no
	// record yet; the listing's order.
	Updated time.Time `json:"updated"`
}

// Jobs lists the queue's jobs, newest first, a page at a time. It reads the job
// records written since the producer's last call of Jobs or JobCounts (the first
// call reads them all: records live for the record TTL, 24 hours by default), and
// keeps what it needs of each in memory (about 130 bytes a record), so that a page
// walks that index and reads only its own records. It also reads the delayed jobs'
// schedules (one request each) when the query can match scheduled jobs, and the
// waiting jobs that no worker has received yet (one request each, newest first, only
// as many as the page needs) when it can match queued ones. Jobs published to the
// plain jobs subject are listed once a worker has written their record.
func (p *Producer) Jobs(ctx context.Context, q JobQuery) (*JobPage, error) {
	if ctx == nil {
		return nil, fmt.Errorf("producer: list jobs of queue %s: %w", p.names.Queue, option.Nil("context"))
	}
	page, err := p.jobs(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("producer: list jobs of queue %s: %w", p.names.Queue, err)
	}
	return page, nil
}

func (p *Producer) jobs(ctx context.Context, q JobQuery) (*JobPage, error) {
	if q.Limit < 0 {
		return nil, option.Invalid("JobQuery.Limit", q.Limit, "0 (the default) or more")
	}
	if q.Limit == 0 {
		q.Limit = DefaultJobsLimit
	}
	if q.State != "" && !slices.Contains(States, q.State) {
		return nil, option.Invalid("JobQuery.State", q.State, "scheduled, queued, running, retrying, done, dead, cancelled or empty")
	}
	after, err := parseCursor(q.Cursor)
	if err != nil {
		return nil, err
	}
	keep := func(j ListedJob) bool {
		return (q.State == "" || j.State == q.State) && (q.Kind == "" || j.Kind == q.Kind) && after.before(j)
	}

	var listed []ListedJob
	idx, unlock, err := p.jobIndex(ctx)
	if err != nil {
		return nil, fmt.Errorf("read job records: %w", err)
	}
	defer unlock()
	if q.State != StateScheduled {
		state, stateKnown := idx.stateOf[q.State]
		kind, kindKnown := idx.kindOf[q.Kind]
		if (q.State == "" || stateKnown) && (q.Kind == "" || kindKnown) { // else no record matches
			listed, err = p.indexedJobs(ctx, idx, q.Limit+1, func(e *indexEntry) bool {
				return (q.State == "" || e.state == state) && (q.Kind == "" || e.kind == kind) &&
					after.before(ListedJob{Record: Record{ID: e.id}, Updated: time.Unix(0, e.updated)})
			})
		}
		if err != nil {
			return nil, fmt.Errorf("read job records: %w", err)
		}
	}
	if q.State == "" || q.State == StateScheduled {
		err := p.scanDelayed(ctx, func(j ListedJob) {
			if keep(j) {
				listed = append(listed, j)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("read delayed jobs: %w", err)
		}
	}
	sortNewestFirst(listed)
	if q.State == "" || q.State == StateQueued {
		// The undelivered jobs are the newest of the stream: merge in as many as could
		// make the page, newest first.
		var bound ListedJob // the oldest job the page would hold without them
		if len(listed) >= q.Limit+1 {
			bound = listed[q.Limit]
		}
		found := 0
		err := p.scanUndelivered(ctx, func(j ListedJob) bool {
			if !bound.Updated.IsZero() && !newer(j, bound) || found > q.Limit {
				return false // older than what the page holds already
			}
			// A record of an earlier message with the id (a job enqueued again) does
			// not stand for this one.
			if seq, claimed := idx.messageSeq(j.ID); (!claimed || seq < j.Sequence) && keep(j) {
				listed = append(listed, j)
				found++
			}
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("read queued jobs: %w", err)
		}
		sortNewestFirst(listed)
	}
	page := &JobPage{Jobs: listed}
	if len(listed) > q.Limit {
		page.Jobs = listed[:q.Limit]
		page.Next = cursorOf(page.Jobs[q.Limit-1])
	}
	return page, nil
}

// scanRecords calls fn with every job record of the queue.
func (p *Producer) scanRecords(ctx context.Context, fn func(ListedJob)) error {
	s, err := p.js.Stream(ctx, "KV_"+p.names.Bucket)
	if err != nil {
		return err
	}
	prefix := "$KV." + p.names.Bucket + "."
	return queue.Scan(ctx, s, false, func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
		if m.Headers().Get("KV-Operation") != "" || m.Headers().Get(jetstream.MarkerReasonHeader) != "" {
			return true // a deleted or expired record
		}
		var r Record
		if err := json.Unmarshal(m.Data(), &r); err != nil || wireid.Encode(r.ID) != strings.TrimPrefix(m.Subject(), prefix) {
			return true // not a record workq can read: left out of the listing
		}
		r.Revision = md.Sequence.Stream
		fn(ListedJob{Record: r, Updated: md.Timestamp})
		return true
	})
}

// scanDelayed calls fn with every delayed job waiting for its time, reading the
// stream forward from its first message on the delayed subjects, one request each.
func (p *Producer) scanDelayed(ctx context.Context, fn func(ListedJob)) error {
	s := p.objects.Stream
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(p.names.DelayedPrefix+">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		seq = m.Sequence + 1
		id, ok := wireid.Decode(strings.TrimPrefix(m.Subject, p.names.DelayedPrefix))
		if !ok {
			continue // not a delayed job workq wrote
		}
		fn(ListedJob{Record: *queuedRecord(p.names.Queue, id, m), Updated: m.Time})
	}
}

// scanUndelivered calls fn with the job messages no worker has received yet, newest
// first, until fn returns false. They are the stream's messages past their level's
// consumer's last delivered sequence (all of a level's without a consumer): a
// WorkQueue stream deletes only what was delivered and acknowledged, so those
// sequences are dense, and each is one request.
func (p *Producer) scanUndelivered(ctx context.Context, fn func(ListedJob) bool) error {
	s := p.objects.Stream
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	ws, err := queue.ReadWorkers(ctx, s, p.names)
	if err != nil {
		return err
	}
	delivered := map[int]uint64{} // by level; 0 for a level without a consumer
	for _, l := range queue.Levels {
		for _, ci := range ws.Consumers {
			if ci.Name == p.names.LevelConsumer(l) {
				delivered[l] = ci.Delivered.Stream
			}
		}
	}
	floor := ws.MinDelivered
	if len(ws.Consumers) < len(queue.Levels) {
		floor = 0
	}
	for seq := info.State.LastSeq; seq > floor && seq >= info.State.FirstSeq; seq-- {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if level, _, ok := p.names.JobLevel(m.Subject); !ok || m.Sequence <= delivered[level] {
			continue // a schedule, or a job its level's consumer delivered already
		}
		id := p.names.MessageJobID(m.Subject, m.Header, m.Sequence)
		if !fn(ListedJob{Record: *queuedRecord(p.names.Queue, id, m), Updated: m.Time}) {
			return nil
		}
	}
	return nil
}

// newer reports whether a comes before b in the listing: newer, or as new with the
// smaller id.
func newer(a, b ListedJob) bool {
	if c := a.Updated.Compare(b.Updated); c != 0 {
		return c > 0
	}
	return a.ID < b.ID
}

func sortNewestFirst(js []ListedJob) {
	slices.SortFunc(js, func(a, b ListedJob) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// cursor is where a page ended: the last job's time and id. The zero cursor is the
// start.
type cursor struct {
	at time.Time
	id string
}

// before reports whether j comes after the cursor in the listing.
func (c cursor) before(j ListedJob) bool {
	return c.at.IsZero() || newer(ListedJob{Record: Record{ID: c.id}, Updated: c.at}, j)
}

func cursorOf(j ListedJob) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(j.Updated.UnixNano(), 10) + " " + j.ID))
}

func parseCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	ns, id, ok := strings.Cut(string(b), " ")
	t, perr := strconv.ParseInt(ns, 10, 64)
	if err != nil || !ok || perr != nil || queue.CheckID(id) != nil {
		return cursor{}, option.Invalid("JobQuery.Cursor", s, "the Next of an earlier page")
	}
	return cursor{at: time.Unix(0, t), id: id}, nil
}
