package sim

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/wireid"
)

// history is what happened in one simulated run, on the bubble's clock: the
// handlers' runs as they saw them, every revision of every job record as the server
// stored it, and the faults.
type history struct {
	start time.Time

	mu   sync.Mutex
	runs []*run
	revs map[string][]revision // by job id, in revision order
	log  []entry
	seen map[uint64]bool // every revision seen (and not lost in a crash), job records' or not
	lost int             // revisions a crash lost after they were seen
	gaps int             // revisions of the records stream never seen

	ended, bound time.Duration // how long after the faults stopped every job had ended, and the bound it had
}

// entry is one line of the history's log.
type entry struct {
	at   time.Duration
	text string
}

// run is one call of a handler.
type run struct {
	job, enqueue, worker string
	attempt              int
	started, ended       time.Time // ended zero: its process died, or it never returned
	outcome              string    // "ok", "error", "panic", "died", "stopped"
}

// revision is one stored revision of a job record.
type revision struct {
	rev     uint64
	at      time.Time // the server's store time
	state   record.State
	enqueue string
	run     string
	attempt int
	lease   time.Duration
	deleted bool
}

func newHistory() *history {
	return &history{start: time.Now(), revs: map[string][]revision{}, seen: map[uint64]bool{}}
}

func (h *history) note(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, entry{time.Since(h.start), fmt.Sprintf(format, args...)})
}

func (h *history) begin(r *run) {
	h.mu.Lock()
	h.runs = append(h.runs, r)
	h.mu.Unlock()
	h.note("run   %s attempt %d enqueue %s on %s", r.job, r.attempt, r.enqueue, r.worker)
}

func (h *history) end(r *run, outcome string) {
	h.mu.Lock()
	r.ended, r.outcome = time.Now(), outcome
	h.mu.Unlock()
	h.note("ended %s attempt %d on %s: %s", r.job, r.attempt, r.worker, outcome)
}

// The job records' revisions are seen as the server stores them: the records
// stream (whose history per key is 1) republishes every revision as it stores it,
// with the revision and store time in its headers, and the simulation's own
// connection subscribes to them. After a restart no other client connects before
// that connection is back (engine.restarted), so none is missed; revisions the
// crash lost (the store had not written them) are dropped from the history.
const revisionsSubject = "simrec"

func (h *history) watch(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, bucket string) error {
	if _, err := nc.Subscribe(revisionsSubject+".>", func(m *nats.Msg) {
		rev, err1 := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		at, err2 := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
		if err1 != nil || err2 != nil {
			h.note("a revision without its sequence or time: %v %v", err1, err2)
			return
		}
		h.revision(m.Header.Get(jetstream.SubjectHeader), m.Data, m.Header.Get("KV-Operation"), rev, at)
	}); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	s, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return err
	}
	cfg := s.CachedInfo().Config
	cfg.RePublish = &jetstream.RePublish{Source: ">", Destination: revisionsSubject + ".>"}
	_, err = js.UpdateStream(ctx, cfg)
	return err
}

// restarted drops the revisions a crash lost: those past the records stream's last
// sequence after the restart.
func (h *history) restarted(last uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, revs := range h.revs {
		n := len(revs)
		for n > 0 && revs[n-1].rev > last {
			n--
		}
		h.revs[id] = revs[:n]
	}
	for rev := range h.seen {
		if rev > last {
			delete(h.seen, rev)
			h.lost++
		}
	}
}

// complete notes the revisions never seen up to the records stream's last one.
func (h *history) complete(last uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for rev := uint64(1); rev <= last; rev++ {
		if !h.seen[rev] {
			h.gaps++
			h.log = append(h.log, entry{time.Since(h.start), fmt.Sprintf("revision %d never seen", rev)})
		}
	}
}

func (h *history) revision(subject string, value []byte, op string, rev uint64, at time.Time) {
	_, key, _ := strings.Cut(strings.TrimPrefix(subject, "$KV."), ".") // $KV.<bucket>.<key>
	id, ok := wireid.Decode(key)
	if !ok {
		h.mu.Lock()
		h.seen[rev] = true
		h.mu.Unlock()
		return
	}
	rv := revision{rev: rev, at: at}
	if op != "" {
		rv.deleted = true
	} else if r, err := record.Decode(id, value, rev); err == nil {
		rv.state, rv.enqueue, rv.run, rv.attempt = r.State, r.Enqueue, r.Run, r.Attempt
		rv.lease = time.Duration(r.LeaseMS) * time.Millisecond
	} else {
		h.mu.Lock()
		h.seen[rev] = true // not a job record (a sequence's or workflow's key)
		h.mu.Unlock()
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[rv.rev] = true
	h.revs[id] = append(h.revs[id], rv)
	what := string(rv.state)
	if rv.deleted {
		what = "removed (" + op + ")"
	}
	h.log = append(h.log, entry{rv.at.Sub(h.start), fmt.Sprintf("record %s rev %d %s attempt %d run %s enqueue %s",
		id, rv.rev, what, rv.attempt, rv.run, rv.enqueue)})
}

func (h *history) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	log := append([]entry(nil), h.log...)
	sort.SliceStable(log, func(i, j int) bool { return log[i].at < log[j].at })
	var b strings.Builder
	for _, e := range log {
		fmt.Fprintf(&b, "%9s %s\n", e.at.Round(time.Millisecond), e.text)
	}
	return b.String()
}
