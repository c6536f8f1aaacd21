package ui

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// The drawing of a line chart: a pure function from series of timed values to
// the coordinates template "chart" (templates/chart.html) renders as inline SVG —
// lines and text with classes, no script and no style attribute, which the
// Content-Security-Policy would block. The time axis runs from the first point to
// the last; the value axis from 0 to a round number at or above the largest value
// (a sparkline's, which has no axes, to the largest value).
// Each line carries its points as numbers too (data-points, "unixms:value"), for
// tests and for whoever reads the page's source.

// point is one value of a series at a time (Unix nanoseconds).
type point struct {
	At int64
	V  float64
}

// series is a named line: Name is its key (data-series, its colour's class), Label
// what the legend calls it.
type series struct {
	Name, Label string
	Points      []point
}

// chartSpec is what a chart shows and how big it is.
type chartSpec struct {
	ID     string               // data-chart
	Title  string               // what it shows, such as "Jobs per second"
	Format func(float64) string // a value as the axis and legend show it
	W, H   int                  // its size in SVG user units (pixels at scale 1)
	Spark  bool                 // a sparkline: no axes, no labels, no margins
	Floor  float64              // the value axis reaches at least this high
}

// chart is a drawn chart: its plot area, axis labels and lines.
type chart struct {
	ID, Title                string
	Summary                  string // the chart in words, its accessible name
	W, H                     int
	Left, Top, Right, Bottom int    // the plot area
	MaxLabel                 string // the value axis' top
	From, To                 string // the time axis' ends, UTC
	Span                     string // the time axis' length
	Series                   []drawnSeries
	Empty                    bool // no point to draw
}

// drawnSeries is a line in the chart's coordinates.
type drawnSeries struct {
	Name, Label string
	Points      string // SVG polyline points: "x,y x,y …"
	Data        string // the values: "unixms:value …"
	N           int    // how many points
	Last        string // the newest value, formatted
	X, Y        string // the newest point, where its dot is drawn
}

// Margins of a chart with axes: room for the value labels left and the time
// labels below.
const (
	chartLeft   = 52
	chartTop    = 8
	chartRight  = 8
	chartBottom = 22
	sparkPad    = 2
)

// drawChart scales series into spec's plot area.
func drawChart(spec chartSpec, ss ...series) chart {
	c := chart{ID: spec.ID, Title: spec.Title, W: spec.W, H: spec.H}
	if spec.Spark {
		c.Left, c.Top, c.Right, c.Bottom = sparkPad, sparkPad, spec.W-sparkPad, spec.H-sparkPad
	} else {
		c.Left, c.Top, c.Right, c.Bottom = chartLeft, chartTop, spec.W-chartRight, spec.H-chartBottom
	}
	from, to, top, n := int64(math.MaxInt64), int64(math.MinInt64), 0.0, 0
	for _, s := range ss {
		for _, p := range s.Points {
			from, to, top = min(from, p.At), max(to, p.At), max(top, p.V)
			n++
		}
	}
	top = max(top, spec.Floor)
	if !spec.Spark { // a sparkline fills its height: it has no axis to label
		top = niceCeil(top)
	}
	c.MaxLabel = spec.Format(top)
	c.Empty = n == 0
	if !c.Empty {
		c.From, c.To = clock(from), clock(to)
		c.Span = shortDuration(time.Duration(to - from))
	}
	x := func(at int64) float64 {
		if to == from {
			return float64(c.Right) // one instant: at the right, where the newest stands
		}
		return float64(c.Left) + float64(at-from)/float64(to-from)*float64(c.Right-c.Left)
	}
	y := func(v float64) float64 {
		return float64(c.Bottom) - max(v, 0)/top*float64(c.Bottom-c.Top)
	}
	var words []string
	for _, s := range ss {
		d := drawnSeries{Name: s.Name, Label: s.Label, N: len(s.Points), Last: "—"}
		var pts, data strings.Builder
		for i, p := range s.Points {
			if i > 0 {
				pts.WriteByte(' ')
				data.WriteByte(' ')
			}
			pts.WriteString(coord(x(p.At)) + "," + coord(y(p.V)))
			data.WriteString(strconv.FormatInt(p.At/int64(time.Millisecond), 10) + ":" + value(p.V))
		}
		d.Points, d.Data = pts.String(), data.String()
		if n := len(s.Points); n > 0 {
			p := s.Points[n-1]
			d.Last, d.X, d.Y = spec.Format(p.V), coord(x(p.At)), coord(y(p.V))
		}
		words = append(words, d.Label+" "+d.Last)
		c.Series = append(c.Series, d)
	}
	if c.Empty {
		c.Summary = spec.Title + ": no samples yet"
	} else {
		c.Summary = spec.Title + " over " + c.Span + ", up to " + c.MaxLabel + "; now " + strings.Join(words, ", ")
	}
	return c
}

// niceCeil is the round number (1, 2 or 5 times a power of ten) at or above v; 1
// for v ≤ 0.
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	exp := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if c := m * exp; c >= v*(1-1e-12) {
			return c
		}
	}
	return 10 * exp
}

// coord formats an SVG coordinate to a tenth of a unit.
func coord(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// value formats a data point's value to a thousandth, without trailing zeros.
func value(f float64) string { return strconv.FormatFloat(math.Round(f*1000)/1000, 'f', -1, 64) }

// clock is the time of day of t (Unix nanoseconds), UTC, to the second.
func clock(t int64) string { return time.Unix(0, t).UTC().Format("15:04:05Z") }
