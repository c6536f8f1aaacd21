//go:build chaos

package chaos

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jobRec is the job record's wire format (docs/wire-format.md, "Job record"), the fields the check reads.
type jobRec struct {
	State   string `json:"state"`
	Attempt int    `json:"attempt"`
	Run     string `json:"run"`
	Enqueue string `json:"enqueue"`
	Worker  *struct {
		Name string `json:"name"`
	} `json:"worker"`
	Result    []byte `json:"result"`
	LastError string `json:"last_error"`
	// A workflow's task.
	Task       string   `json:"task"`
	Parents    []string `json:"parents"`
	WaitingFor []string `json:"waiting_for"`
}

// revision is one write to the records bucket: one message of its stream.
type revision struct {
	seq      uint64 // stream sequence: the KV revision
	prev     uint64 // the key's previous sequence (Nats-Last-Sequence); 0: first write
	readBack bool   // read from the stream at the end, not heard live (prev unknown)
	key      string
	at       time.Time // the server's store time
	op       string    // KV-Operation: "" for a put, DEL, PURGE
	rec      jobRec
	raw      []byte
}

func (r *revision) String() string {
	w := "-"
	if r.rec.Worker != nil {
		w = r.rec.Worker.Name
	}
	s := fmt.Sprintf("rev %d (prev %d) %s %s attempt %d run %s enqueue %s worker %s", r.seq, r.prev, r.at.Format("15:04:05.000"), r.rec.State, r.rec.Attempt, r.rec.Run, r.rec.Enqueue, w)
	if r.op != "" {
		s += " op " + r.op
	}
	if r.readBack {
		s += " (read back)"
	}
	return s
}

// observer hears every revision the records bucket's stream republishes.
type observer struct {
	t       testing.TB
	stream  string // KV_WORKQ_<queue>_JOBS
	subject string // $KV.WORKQ_<queue>_JOBS.
	nc      *nats.Conn
	sub     *nats.Subscription

	mu        sync.Mutex
	revs      map[uint64]*revision
	latest    map[string]*revision
	terminal  int
	conflicts []string
	bad       []string
	reconnect []time.Time
	lastHeard time.Time

	seen   int       // finishedJobs: the count it last returned (its caller's goroutine only)
	seenAt time.Time // and since when
}

// observe sets the records bucket of queue to republish every write to
// chaos.rec.<queue>.<key> and subscribes to that from a connection of its own. It must
// run before the first record is written.
func observe(t testing.TB, url string, js jetstream.JetStream, queue string) *observer {
	t.Helper()
	o := &observer{t: t, stream: "KV_WORKQ_" + queue + "_JOBS", subject: "$KV.WORKQ_" + queue + "_JOBS.",
		revs: map[uint64]*revision{}, latest: map[string]*revision{}}
	o.nc, _ = connect(t, url, nats.ReconnectHandler(func(*nats.Conn) {
		o.mu.Lock()
		o.reconnect = append(o.reconnect, time.Now())
		o.mu.Unlock()
	}))
	dest := "chaos.rec." + queue + "."
	sub, err := o.nc.Subscribe(dest+">", o.hear)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	o.sub = sub
	if err := o.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, o.stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if s.CachedInfo().State.LastSeq != 0 {
		t.Fatalf("%s already has %d messages: the observer must start before the first record write", o.stream, s.CachedInfo().State.Msgs)
	}
	cfg.RePublish = &jetstream.RePublish{Source: o.subject + ">", Destination: dest + ">"}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("add republish to %s: %v", o.stream, err)
	}
	return o
}

func (o *observer) hear(m *nats.Msg) {
	seq, _ := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	prev, _ := strconv.ParseUint(m.Header.Get("Nats-Last-Sequence"), 10, 64)
	at, _ := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp"))
	r := &revision{seq: seq, prev: prev, key: strings.TrimPrefix(m.Header.Get("Nats-Subject"), o.subject), at: at,
		op: m.Header.Get("KV-Operation"), raw: m.Data}
	o.add(r)
}

func (o *observer) add(r *revision) {
	if r.op == "" && len(r.raw) > 0 {
		if err := json.Unmarshal(r.raw, &r.rec); err != nil {
			o.mu.Lock()
			o.bad = append(o.bad, fmt.Sprintf("rev %d of %s is not a job record: %v: %q", r.seq, r.key, err, r.raw))
			o.mu.Unlock()
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastHeard = time.Now()
	if old, ok := o.revs[r.seq]; ok {
		// A server that lost stored writes in a crash would reuse their sequences.
		if old.key != r.key || !bytes.Equal(old.raw, r.raw) {
			o.conflicts = append(o.conflicts, fmt.Sprintf("sequence %d seen twice with different writes: %s %s / %s %s", r.seq, old.key, old, r.key, r))
		}
		return
	}
	o.revs[r.seq] = r
	if l := o.latest[r.key]; l == nil || r.seq > l.seq {
		if l != nil && terminal(l) {
			o.terminal--
		}
		o.latest[r.key] = r
		if terminal(r) {
			o.terminal++
		}
	}
}

func terminal(r *revision) bool { return r.rec.State == "done" || r.rec.State == "dead" }

// terminalJobs is the number of jobs whose latest heard revision is done or dead.
func (o *observer) terminalJobs() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.terminal
}

// finishedJobs is terminalJobs, with the revisions its connection missed (they were
// republished while it was down, around a server kill) read back from the stream
// whenever the count has not moved for 3s: otherwise a job whose last write was
// missed would look unfinished for ever.
func (o *observer) finishedJobs(nc *nats.Conn, js jetstream.JetStream) int {
	n := o.terminalJobs()
	if n != o.seen {
		o.seen, o.seenAt = n, time.Now()
	} else if time.Since(o.seenAt) > 3*time.Second {
		o.fillGaps(nc, streamLastSeq(o.t, js, o.stream))
		o.seenAt = time.Now()
		n = o.terminalJobs()
	}
	return n
}

func (o *observer) reconnectedSince(t time.Time) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.reconnect {
		if r.After(t) {
			return r, true
		}
	}
	return time.Time{}, false
}

// catchUp waits until every sequence up to the stream's last is heard, or until nothing
// new has been heard for 2s (what is still missing then was lost: the check reads it
// back or reports it).
func (o *observer) catchUp(js jetstream.JetStream) uint64 {
	last := streamLastSeq(o.t, js, o.stream)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		o.mu.Lock()
		n, quiet := len(o.revs), time.Since(o.lastHeard) > 2*time.Second
		o.mu.Unlock()
		if uint64(n) >= last || quiet {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return last
}

// fillGaps reads back from the stream every sequence up to last that was not heard
// (the observer's connection was down when it was republished) and adds it; it
// returns how many it read back and the sequences the stream no longer has.
func (o *observer) fillGaps(nc *nats.Conn, last uint64) (readBackCount int, lost []uint64) {
	o.mu.Lock()
	var missing []uint64
	for s := uint64(1); s <= last; s++ {
		if o.revs[s] == nil {
			missing = append(missing, s)
		}
	}
	o.mu.Unlock()
	for _, s := range missing {
		if r, ok := readBack(o.t, nc, o.stream, s); ok {
			o.add(r)
			readBackCount++
		} else {
			lost = append(lost, s)
		}
	}
	return readBackCount, lost
}

func streamLastSeq(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	return s.CachedInfo().State.LastSeq
}

// readBack fetches the message at seq from the stream leader (not a direct get, which
// any replica may answer); false if the stream no longer has it (it was overwritten).
func readBack(t testing.TB, nc *nats.Conn, stream string, seq uint64) (*revision, bool) {
	t.Helper()
	req, _ := json.Marshal(map[string]uint64{"seq": seq})
	var resp struct {
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Hdrs    []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
		Error *struct {
			Code    int    `json:"code"`
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
	}
	var err error
	for i := 0; i < 20; i++ {
		var m *nats.Msg
		m, err = nc.Request("$JS.API.STREAM.MSG.GET."+stream, req, 3*time.Second)
		if err == nil {
			if err = json.Unmarshal(m.Data, &resp); err == nil {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("read back %s sequence %d: %v", stream, seq, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrCode == 10037 { // no message found
			return nil, false
		}
		t.Fatalf("read back %s sequence %d: %s", stream, seq, resp.Error.Desc)
	}
	r := &revision{seq: resp.Message.Seq, readBack: true, at: resp.Message.Time, raw: resp.Message.Data}
	parts := strings.SplitN(resp.Message.Subject, ".", 3)
	if len(parts) == 3 {
		r.key = parts[2]
	}
	if len(resp.Message.Hdrs) > 0 {
		if h, err := nats.DecodeHeadersMsg(resp.Message.Hdrs); err == nil {
			r.op = h.Get("KV-Operation")
		}
	}
	return r, true
}

// historyOf is the history heard of key's record so far, oldest first, for messages.
func (o *observer) historyOf(key string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var revs []*revision
	for _, r := range o.revs {
		if r.key == key {
			revs = append(revs, r)
		}
	}
	slices.SortFunc(revs, func(a, b *revision) int { return cmp.Compare(a.seq, b.seq) })
	return history(revs)
}
