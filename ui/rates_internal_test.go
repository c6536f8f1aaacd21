package ui

import (
	"math"
	"testing"
	"time"

	"github.com/workq/workq/admin"
)

// Rates are per minute over the samples of the last five minutes, start with the
// second sample, and start over when a queue is re-created.
func TestRates(t *testing.T) {
	t.Parallel()
	rs := newHistory(2 * time.Second) // keeps a reading a second after the last kept
	t0 := time.Unix(1_000_000, 0)
	q := admin.QueueInfo{Name: "q", LastSequence: 100, Jobs: 40, Dead: 5}
	if r := rs.observe(q, t0, nil); r.Known {
		t.Fatalf("one sample gave rates: %+v", r)
	}
	// A minute later: 60 more stored, 20 fewer held (so 80 left), 3 more dead.
	q.LastSequence, q.Jobs, q.Dead = 160, 20, 8
	r := rs.observe(q, t0.Add(time.Minute), nil)
	if !r.Known || r.In != 60 || r.Out != 80 || r.Dead != 3 {
		t.Fatalf("rates = %+v; want in 60, out 80, dead 3 per minute", r)
	}
	// A sample within a second of the last is not kept.
	rs.observe(q, t0.Add(time.Minute+100*time.Millisecond), nil)
	if n := len(rs.samples("q")); n != 2 {
		t.Fatalf("%d samples; want 2", n)
	}
	// Six minutes on, the first sample has aged out: over the last 5 minutes.
	q.LastSequence = 460
	r = rs.observe(q, t0.Add(6*time.Minute), nil)
	if math.Abs(r.In-60) > 1e-9 || r.Span != 5*time.Minute {
		t.Fatalf("rates = %+v; want in 60 per minute over 5m", r)
	}
	// Requeued dead letters lower the dead count: no negative rate.
	q.Dead = 0
	if r = rs.observe(q, t0.Add(7*time.Minute), nil); r.Dead != 0 {
		t.Fatalf("dead rate %v after a requeue; want 0", r.Dead)
	}
	// A re-created queue's sequence starts again.
	q.LastSequence = 3
	if r = rs.observe(q, t0.Add(8*time.Minute), nil); r.Known {
		t.Fatalf("rates across a re-created queue: %+v", r)
	}
	rs.forget(map[string]bool{})
	if len(rs.queues) != 0 {
		t.Fatal("forget kept a removed queue's samples")
	}
}

// Payloads are previewed as JSON, text or hex, and cut when large.
func TestPreview(t *testing.T) {
	t.Parallel()
	if p := preview(nil); p.Format != "empty" {
		t.Errorf("nil: %+v", p)
	}
	if p := preview([]byte(`{"a":[1,2]}`)); p.Format != "json" || p.Text != "{\n  \"a\": [\n    1,\n    2\n  ]\n}" {
		t.Errorf("json: %+v", p)
	}
	if p := preview([]byte("héllo\nworld")); p.Format != "text" || p.Text != "héllo\nworld" || p.Truncated {
		t.Errorf("text: %+v", p)
	}
	if p := preview([]byte{'a', 0, 'b'}); p.Format != "binary" || p.Text == "" {
		t.Errorf("a NUL byte: %+v", p)
	}
	if p := preview([]byte{0xff, 0xfe}); p.Format != "binary" {
		t.Errorf("invalid UTF-8: %+v", p)
	}
	big := make([]byte, previewLimit+10)
	for i := range big {
		big[i] = 'x'
	}
	big[previewLimit-1] = 0xc3 // é straddles the cut
	big[previewLimit] = 0xa9
	if p := preview(big); p.Format != "text" || !p.Truncated || len(p.Text) != previewLimit-1 || p.Shown != previewLimit-1 || p.Size != len(big) {
		t.Errorf("large text: format %s, truncated %v, %d shown of %d", p.Format, p.Truncated, p.Shown, p.Size)
	}
	bin := make([]byte, hexPreviewLimit*2)
	if p := preview(bin); !p.Truncated || p.Shown != hexPreviewLimit {
		t.Errorf("large binary: %+v", p.Shown)
	}
}
