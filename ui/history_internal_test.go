package ui

import (
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// A queue's history is a ring of at most historyLen samples, the newest kept and
// in order, in no more memory than the doc comment says; a reading is kept at most
// every half interval; the samples returned span the last historyIntervals
// intervals.
func TestHistoryBounds(t *testing.T) {
	t.Parallel()
	if size := unsafe.Sizeof(sample{}); size != 64 || historyLen*size > historyBytes || historyBytes > 92_224 {
		t.Fatalf("a sample is %d bytes, %d for a queue's history; the doc says 64 and %d (90 KiB)", size, historyLen*size, historyBytes)
	}
	every := time.Second
	h := newHistory(every)
	t0 := time.Unix(1_000_000, 0)
	q := admin.QueueInfo{Name: "q"}
	const n = 3 * historyLen
	for i := range n {
		q.LastSequence = uint64(i)
		h.observe(q, t0.Add(time.Duration(i)*every), nil)
		if r := h.queues["q"]; r.len() > historyLen || cap(r.buf) > historyLen {
			t.Fatalf("after %d samples the ring holds %d in a buffer of %d; want at most %d", i+1, r.len(), cap(r.buf), historyLen)
		}
	}
	r := h.queues["q"]
	if r.len() != historyLen || r.at(0).arrived != n-historyLen || r.last().arrived != n-1 {
		t.Fatalf("ring of %d from %d to %d; want the newest %d, %d to %d", r.len(), r.at(0).arrived, r.last().arrived, historyLen, n-historyLen, n-1)
	}
	for i := 1; i < r.len(); i++ {
		if r.at(i).at <= r.at(i-1).at {
			t.Fatalf("samples %d and %d out of order", i-1, i)
		}
	}
	// The samples span historyIntervals intervals: the ring holds more (room for
	// the pages' readings between the sampler's), which are not shown.
	ss := h.samples("q")
	if len(ss) != historyIntervals+1 || time.Duration(ss[len(ss)-1].at-ss[0].at) != historyIntervals*every {
		t.Fatalf("%d samples over %s; want %d over %s", len(ss), time.Duration(ss[len(ss)-1].at-ss[0].at), historyIntervals+1, historyIntervals*every)
	}
	// Readings closer than half an interval to the last kept one are not kept.
	last := t0.Add((n - 1) * every)
	for _, d := range []time.Duration{100 * time.Millisecond, 499 * time.Millisecond, -time.Second} {
		q.LastSequence = n
		h.observe(q, last.Add(d), nil)
		if got := h.queues["q"].last().at; got != last.UnixNano() {
			t.Fatalf("a reading %s after the last was kept", d)
		}
	}
	h.observe(q, last.Add(every/2), nil)
	if got := h.queues["q"].last().at; got != last.Add(every/2).UnixNano() {
		t.Fatal("a reading half an interval after the last was not kept")
	}
}

// Deleted queues are forgotten; a queue re-created under the same name (a new
// creation time, or a sequence that went back) starts a new history.
func TestHistoryForgets(t *testing.T) {
	t.Parallel()
	h := newHistory(time.Second)
	t0 := time.Unix(1_000_000, 0)
	created := t0.Add(-time.Hour)
	for i := range 5 {
		at := t0.Add(time.Duration(i) * time.Second)
		h.observe(admin.QueueInfo{Name: "a", Created: created, LastSequence: uint64(10 * i)}, at, nil)
		h.observe(admin.QueueInfo{Name: "b", Created: created, LastSequence: uint64(10 * i)}, at, nil)
	}
	h.forget(map[string]bool{"a": true})
	if h.samples("b") != nil || len(h.queues) != 1 || len(h.samples("a")) != 5 {
		t.Fatalf("after forgetting b: a has %d samples, b %d; want 5 and none", len(h.samples("a")), len(h.samples("b")))
	}
	// Re-created at a later time, with a higher sequence than before all the same.
	h.observe(admin.QueueInfo{Name: "a", Created: t0, LastSequence: 100}, t0.Add(10*time.Second), nil)
	if n := len(h.samples("a")); n != 1 {
		t.Fatalf("a re-created queue kept %d samples; want its 1", n)
	}
	// Its sequence starting again.
	h.observe(admin.QueueInfo{Name: "a", Created: t0, LastSequence: 2}, t0.Add(20*time.Second), nil)
	if ss := h.samples("a"); len(ss) != 1 || ss[0].arrived != 2 {
		t.Fatalf("after the sequence went back: %+v; want the new sample only", ss)
	}
}

// The flow per second between samples is what the counters say: arrived from the
// last sequence, left from it less what the stream holds, dead from the dead
// letters; depths and the oldest job's age are the samples' own.
func TestFlowSeries(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_000_000, 0)
	first := time.Unix(999_990, 0) // the oldest job, 10 s before t0
	infos := []admin.QueueInfo{
		{LastSequence: 100, Jobs: 40, Dead: 5, Pending: 30, Running: 4, Retrying: 1, FirstJob: first},
		// 2 s later: 20 stored, 30 left (40+20-30 = 30 held), 2 dead.
		{LastSequence: 120, Jobs: 30, Dead: 7, Pending: 25, Running: 3, Retrying: 2, FirstJob: first},
		// 4 s later: 8 stored, 38 left (30+8-38 = 0 held); dead letters requeued (no negative rate).
		{LastSequence: 128, Jobs: 0, Dead: 1, Pending: 0},
	}
	var ss []sample
	for i, at := range []time.Time{t0, t0.Add(2 * time.Second), t0.Add(6 * time.Second)} {
		ss = append(ss, sampleOf(infos[i], at))
	}
	// The sampler's readings count the failed attempts seen (1 + the count): 4 more
	// in the first 2 s, none in the next 4 s.
	ss[0].failed, ss[1].failed, ss[2].failed = 1+3, 1+7, 1+7
	want := map[string][]float64{"in": {10, 2}, "out": {14, 9.5}, "dead": {1, 0}, "failed": {2, 0}} // out: done, what left less what died
	for _, s := range flowSeries(ss) {
		if len(s.Points) != 2 {
			t.Fatalf("%s: %d points; want 2", s.Name, len(s.Points))
		}
		for i, p := range s.Points {
			if math.Abs(p.V-want[s.Name][i]) > 1e-9 || p.At != ss[i+1].at {
				t.Errorf("%s point %d = %v at %d; want %v at the later sample", s.Name, i, p.V, p.At, want[s.Name][i])
			}
		}
	}
	cs := queueCharts(ss)
	for _, c := range []struct {
		chart, series int
		want          string
	}{
		{1, 0, "1000000000:30 1000002000:25 1000006000:0"}, // waiting
		{1, 1, "1000000000:4 1000002000:3 1000006000:0"},   // running
		{1, 2, "1000000000:1 1000002000:2 1000006000:0"},   // retrying
		{2, 0, "1000000000:10 1000002000:12 1000006000:0"}, // the oldest job's age, s: none at the end
		{0, 0, "1000002000:10 1000006000:2"},               // enqueued per second
	} {
		if got := cs[c.chart].Series[c.series]; got.Data != c.want {
			t.Errorf("chart %s, series %s: points %q; want %q", cs[c.chart].ID, got.Name, got.Data, c.want)
		}
	}
	// One sample: depths have a point, rates none yet.
	one := queueCharts(ss[:1])
	if one[0].Series[0].N != 0 || one[1].Series[0].N != 1 || one[0].Empty != true || one[1].Empty {
		t.Errorf("one sample: %d rate points, %d depth points; want 0 and 1", one[0].Series[0].N, one[1].Series[0].N)
	}
}

// Thinning keeps the first and last samples and about n in all; the rates between
// the kept ones are the exact averages, and a peak of the depth between them shows.
func TestThin(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_000_000, 0)
	var ss []sample
	for i := range 1000 {
		q := admin.QueueInfo{LastSequence: uint64(3 * i)} // 3 jobs a second
		if i == 501 {
			q.Pending = 99 // a peak between two kept samples
		}
		ss = append(ss, sampleOf(q, t0.Add(time.Duration(i)*time.Second)))
	}
	th := thin(ss, 100)
	if len(th) < 95 || len(th) > 101 || th[0] != ss[0] || th[len(th)-1].at != ss[len(ss)-1].at {
		t.Fatalf("thinned to %d samples from %d to %d; want about 100, the first and the last", len(th), th[0].at, th[len(th)-1].at)
	}
	peak := false
	for _, s := range th {
		peak = peak || s.pending == 99
	}
	if !peak {
		t.Error("the peak of the waiting depth was thinned away")
	}
	for _, p := range flowSeries(th)[0].Points {
		if math.Abs(p.V-3) > 1e-9 {
			t.Fatalf("a thinned rate is %v; want 3 per second", p.V)
		}
	}
	if got := thin(ss[:5], 100); len(got) != 5 {
		t.Errorf("thin of fewer samples than n changed them: %d", len(got))
	}
}

// A sampler's reading brings its tally of failed attempts to the page's reading
// kept just before it, which has none; a page's reading never takes a tally away.
// A reading older than the newest kept (the sampler's, from the pages' snapshot)
// with smaller counters is not a queue made again: the history stays.
func TestHistoryKeepsTallies(t *testing.T) {
	t.Parallel()
	const every = time.Second
	h := newHistory(every)
	t0 := time.Unix(2_000_000, 0)
	q := admin.QueueInfo{Name: "q", Created: t0, LastSequence: 5}
	h.observe(q, t0, nil) // a page
	q.LastSequence = 10
	h.observe(q, t0.Add(time.Second), nil) // a page, a second later
	q.LastSequence = 8
	h.observe(q, t0.Add(900*time.Millisecond), &producer.JobTally{FailedAttempts: 3}) // the sampler, from an older snapshot
	q.LastSequence = 11
	h.observe(q, t0.Add(1200*time.Millisecond), nil) // a page again
	ss := h.samples("q")
	if len(ss) != 2 || ss[0].arrived != 5 || ss[1].arrived != 10 || ss[1].failed != 4 {
		t.Fatalf("samples %+v; want the two pages' readings, the second with the sampler's tally", ss)
	}
}
