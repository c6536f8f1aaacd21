package ui

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The value axis ends at a round number at or above the largest value.
func TestNiceCeil(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ v, want float64 }{
		{0, 1}, {-3, 1}, {0.3, 0.5}, {1, 1}, {1.01, 2}, {2, 2}, {3, 5}, {7, 10}, {10, 10}, {11, 20}, {49, 50}, {51, 100}, {12345, 20000},
	} {
		if got := niceCeil(c.v); got != c.want {
			t.Errorf("niceCeil(%v) = %v; want %v", c.v, got, c.want)
		}
	}
}

// Points are scaled into the plot area: the first at its left, the last at its
// right, 0 at its bottom and the axis' top at its top; each line carries its values.
func TestDrawChartScales(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0).UnixNano()
	s := series{Name: "in", Label: "enqueued", Points: []point{{t0, 0}, {t0 + 10e9, 4}, {t0 + 20e9, 8}}}
	flat := series{Name: "out", Label: "left", Points: []point{{t0 + 10e9, 1.23456}}}
	c := drawChart(chartSpec{ID: "rates", Title: "Jobs per second", Format: perSecond, W: 400, H: 150, Floor: 1}, s, flat)
	// Plot area: x 52…392, y 8…128; the axis' top is 10 (8 rounded up).
	if c.Left != 52 || c.Right != 392 || c.Top != 8 || c.Bottom != 128 || c.MaxLabel != "10/s" {
		t.Fatalf("plot area %d…%d × %d…%d, top %q; want 52…392 × 8…128, 10/s", c.Left, c.Right, c.Top, c.Bottom, c.MaxLabel)
	}
	if got := c.Series[0].Points; got != "52.0,128.0 222.0,80.0 392.0,32.0" {
		t.Errorf("points %q; want 52.0,128.0 222.0,80.0 392.0,32.0", got)
	}
	if got := c.Series[0].Data; got != "1700000000000:0 1700000010000:4 1700000020000:8" {
		t.Errorf("data %q", got)
	}
	if got := c.Series[1]; got.Data != "1700000010000:1.235" || got.Points != "222.0,113.2" || got.Last != "1.23/s" || got.X != "222.0" {
		t.Errorf("second series %+v", got)
	}
	if c.From != "22:13:20Z" || c.To != "22:13:40Z" || c.Span != "20s" || c.Empty {
		t.Errorf("time axis %s to %s over %s", c.From, c.To, c.Span)
	}
	if want := "Jobs per second over 20s, up to 10/s; now enqueued 8/s, left 1.23/s"; c.Summary != want {
		t.Errorf("summary %q; want %q", c.Summary, want)
	}
}

// No point: an empty chart that says so. One point: drawn at the right edge, the
// newest, with its value.
func TestDrawChartEmptyAndSingle(t *testing.T) {
	t.Parallel()
	spec := chartSpec{ID: "depth", Title: "Jobs in the queue", Format: count, W: 400, H: 150, Floor: 1}
	c := drawChart(spec, series{Name: "waiting", Label: "waiting"})
	if !c.Empty || c.Series[0].Points != "" || c.Series[0].Data != "" || c.Series[0].Last != "—" || c.MaxLabel != "1" ||
		c.Summary != "Jobs in the queue: no samples yet" {
		t.Errorf("empty chart %+v", c)
	}
	t0 := time.Unix(1_700_000_000, 0).UnixNano()
	c = drawChart(spec, series{Name: "waiting", Label: "waiting", Points: []point{{t0, 3}}})
	if c.Empty || c.Series[0].Points != "392.0,56.0" || c.Series[0].Data != "1700000000000:3" || c.MaxLabel != "5" || c.Span != "0s" {
		t.Errorf("one point: %+v", c)
	}
	// A sparkline has no margins.
	c = drawChart(chartSpec{ID: "spark", Title: "x", Format: perSecond, W: 120, H: 28, Spark: true, Floor: 1},
		series{Name: "in", Points: []point{{t0, 0}, {t0 + 1e9, 1}}})
	if c.Series[0].Points != "2.0,26.0 118.0,2.0" {
		t.Errorf("sparkline points %q", c.Series[0].Points)
	}
}

// A chart's names and numbers go into the page escaped: a queue name (or any
// label) cannot add markup to the SVG, and the SVG holds no style attribute.
func TestChartTemplateEscapes(t *testing.T) {
	t.Parallel()
	ps, err := loadPages()
	if err != nil {
		t.Fatal(err)
	}
	hostile := `q"><script>alert(1)</script><g onload="x`
	t0 := time.Unix(1_700_000_000, 0)
	var ss []sample
	for i := range 3 {
		ss = append(ss, sample{at: t0.Add(time.Duration(i) * time.Second).UnixNano(), arrived: uint64(i)})
	}
	spark := sparkline(hostile, ss)
	big := drawChart(chartSpec{ID: "rates", Title: hostile, Format: perSecond, W: 400, H: 150},
		series{Name: "in", Label: hostile, Points: flowSeries(ss)[0].Points})
	for name, c := range map[string]chart{"spark": spark, "chart": big} {
		var buf bytes.Buffer
		if err := ps.sets["queue"].ExecuteTemplate(&buf, name, c); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if strings.Contains(out, "<script>") || strings.Contains(out, "<g onload") || strings.Contains(out, "style=") {
			t.Errorf("%s: not escaped:\n%s", name, out)
		}
		if !strings.Contains(out, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s: the name is not shown escaped:\n%s", name, out)
		}
		if !strings.Contains(out, `data-series="in" data-points="1700000001000:1 1700000002000:1"`) {
			t.Errorf("%s: no points of the enqueued series:\n%s", name, out)
		}
	}
}
