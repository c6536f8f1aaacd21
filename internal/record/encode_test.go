package record

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// The hand-written encoding is encoding/json's, byte for byte, so that records read the
// same by every client whichever encoder wrote them: HTML characters, control
// characters, invalid UTF-8, U+2028/9, times in any zone and with monotonic readings,
// zero values that are omitted, results of any bytes.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("", -(3*3600 + 30*60))
	now := time.Now() // with a monotonic reading, which JSON drops
	strs := []string{"", "a", "job-42", `quote " and \ backslash`, "<b>&amp;</b>", "ctl \x00\x01\b\f\n\r\t\x1f\x7f",
		"é ü 日本 🙂", "bad \xff\xfe utf8 \xc3", "sep \u2028 \u2029 end", "tail \xe2\x80"}
	times := []time.Time{{}, now, now.UTC(), now.In(zone), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Unix(0, 0), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	pickT := func() time.Time { return times[rng.IntN(len(times))] }
	for i := range 2000 {
		r := &Record{
			ID: pick(strs), Queue: pick(strs), Kind: pick(strs), State: State(pick(strs)),
			Attempt: rng.IntN(5) - 1, MaxAttempts: rng.IntN(3), Enqueue: pick(strs), Run: pick(strs),
			LeaseMS: rng.Int64N(3) - 1, Sequence: rng.Uint64(), LastError: pick(strs),
			EnqueuedAt: pickT(), StartedAt: pickT(), FinishedAt: pickT(), RetryAt: pickT(), Revision: 7,
			ScheduledAt: pickT(), Schedule: pick(strs),
		}
		if i%5 != 0 {
			r.Workflow, r.Task, r.RunIfFailed = pick(strs), pick(strs), i%7 == 0
			for _, l := range []*[]string{&r.Parents, &r.Dependents, &r.WaitingFor, &r.FailedParents} {
				switch rng.IntN(3) {
				case 1:
					*l = []string{}
				case 2:
					*l = []string{pick(strs), pick(strs), pick(strs)}[:1+rng.IntN(3)]
				}
			}
		}
		switch rng.IntN(4) {
		case 1:
			r.Progress, r.ProgressMsg, r.ProgressAt = rng.Float64(), pick(strs), pickT()
		case 2:
			r.Progress = []float64{1, 0.5, 1e-7, 3e-9, 0.000001, 1e22, 0.1 + 0.2}[rng.IntN(7)]
		}
		for k := range rng.IntN(4) {
			r.Errors = append(r.Errors, Failure{Attempt: k + 1, Started: pickT(), At: pickT(), Worker: pick(strs), Error: pick(strs)})
		}
		if i%3 != 0 {
			r.Worker = &Worker{Name: pick(strs), Host: pick(strs), PID: rng.IntN(100000)}
		}
		switch i % 4 {
		case 1:
			r.Result = []byte{}
		case 2:
			r.Result = []byte(pick(strs))
		case 3:
			r.Result = make([]byte, rng.IntN(40))
			for k := range r.Result {
				r.Result[k] = byte(rng.IntN(256))
			}
		}
		if i%4 == 1 {
			r.SequenceKey, r.After, r.HaltDead, r.Halted = pick(strs), pick(strs), i%8 == 1, i%12 == 1
		}
		if i%3 == 1 {
			r.StoredAt = pickT()
			r.Ended = [][]string{nil, {}, {pick(strs)}, {pick(strs), pick(strs)}}[rng.IntN(4)]
		}
		switch i % 6 {
		case 1:
			r.Message = &Message{Subject: pick(strs)}
		case 2, 3:
			r.Message = &Message{Subject: pick(strs), Header: map[string][]string{}, Data: []byte(pick(strs))}
			for range rng.IntN(4) {
				r.Message.Header[pick(strs)] = [][]string{nil, {}, {pick(strs)}, {pick(strs), pick(strs)}}[rng.IntN(4)]
			}
		}
		want, werr := json.Marshal(r)
		got, gerr := r.AppendJSON([]byte("prefix"))
		if werr != nil || gerr != nil {
			t.Fatalf("record %+v: json.Marshal: %v, AppendJSON: %v", r, werr, gerr)
		}
		if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
			t.Fatalf("record %+v:\n got %s\nwant prefix%s", r, got, want)
		}
		got = got[len("prefix"):]
		var back Record
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("decoding %s: %v", got, err)
		}
	}
}

// A time JSON cannot hold fails the encoding, as it fails json.Marshal.
func TestAppendJSONBadTime(t *testing.T) {
	t.Parallel()
	r := &Record{ID: "a", StartedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := json.Marshal(r); err == nil {
		t.Fatal("json.Marshal accepted year 10000")
	}
	if _, err := r.AppendJSON(nil); err == nil {
		t.Fatal("AppendJSON accepted year 10000")
	}
}

// AppendJSON(nil) allocates once: its size hint covers the document.
// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestAppendJSONSizeHint(t *testing.T) {
	now := time.Now()
	r := &Record{ID: "01JXYZABCDEFGHJKMNPQRSTVWX", Queue: "emails", Kind: "send_email", State: Done, Attempt: 3, MaxAttempts: 10,
		Enqueue: "Q7cY0aZkq1VxWn2E", Run: "r8Zb2T0cQw1yHn4K", LeaseMS: 30000, Sequence: 1 << 40, Worker: &Worker{Name: "host-1234", Host: "host", PID: 1234567},
		EnqueuedAt: now, StartedAt: now, FinishedAt: now, RetryAt: now, LastError: "boom", Result: []byte("a result"),
		ScheduledAt: now, Schedule: "nightly-report"}
	b, _ := r.AppendJSON(nil)
	if len(b) > r.sizeHint() {
		t.Fatalf("document of %d bytes, size hint %d", len(b), r.sizeHint())
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = r.AppendJSON(nil) }); n != 1 {
		t.Fatalf("AppendJSON(nil) made %v allocations, want 1", n)
	}
}
