package ui

import (
	"strconv"
	"strings"
	"time"
)

// A queue's charts, from its history (history.go): its flow per second — jobs
// enqueued (stored), done (left the stream, less dead: done or cancelled) and dead, each the
// difference of two samples' counters over the time between them (flow, in
// rates.go) —, its depths (waiting, running, retrying) and its oldest job's age.
// The queue page draws the three, the queues page a sparkline of the flow per queue.

// How many points a chart draws at most: the history is thinned to them.
const (
	chartPoints = 240
	sparkPoints = 60
)

// The charts' sizes.
const (
	chartW, chartH = 400, 150
	sparkW, sparkH = 120, 28
)

// queueCharts are the queue page's charts over ss: flow, depth, age.
func queueCharts(ss []sample) []chart {
	ss = thin(ss, chartPoints)
	depth := func(name, label string, of func(sample) float64) series {
		s := series{Name: name, Label: label, Points: make([]point, len(ss))}
		for i, e := range ss {
			s.Points[i] = point{e.at, of(e)}
		}
		return s
	}
	return []chart{
		drawChart(chartSpec{ID: "rates", Title: "Jobs per second", Format: perSecond, W: chartW, H: chartH, Floor: 1},
			flowSeries(ss)...),
		drawChart(chartSpec{ID: "depth", Title: "Jobs in the queue", Format: count, W: chartW, H: chartH, Floor: 1},
			depth("waiting", "waiting", func(e sample) float64 { return float64(e.pending) }),
			depth("running", "running", func(e sample) float64 { return float64(e.running) }),
			depth("retrying", "retrying", func(e sample) float64 { return float64(e.retrying) })),
		drawChart(chartSpec{ID: "age", Title: "Oldest job's age", Format: age, W: chartW, H: chartH, Floor: 1},
			depth("oldest", "oldest job", func(e sample) float64 { return time.Duration(e.oldest).Seconds() })),
	}
}

// sparkline is the queues page's chart of queue name: jobs enqueued and done per
// second.
func sparkline(name string, ss []sample) chart {
	fs := flowSeries(thin(ss, sparkPoints))
	return drawChart(chartSpec{ID: "spark", Title: "Jobs enqueued and done per second on queue " + name, Format: perSecond,
		W: sparkW, H: sparkH, Spark: true, Floor: 1}, fs[0], fs[1])
}

// flowSeries are the rates per second between consecutive samples, each at the
// later one: enqueued ("in"), done ("out": what left the stream less what died, so
// done or cancelled) and dead; and failed attempts, between the samples that
// counted them (the sampler's, from admin.JobTally).
func flowSeries(ss []sample) []series {
	in := series{Name: "in", Label: "enqueued"}
	out := series{Name: "out", Label: "done (or cancelled)"}
	dead := series{Name: "dead", Label: "dead"}
	failed := series{Name: "failed", Label: "failed attempts"}
	var tallied *sample // the last sample with the failed attempts counted
	for i := range ss {
		if b := ss[i]; b.failed != 0 {
			if a := tallied; a != nil && b.at > a.at && b.failed >= a.failed {
				failed.Points = append(failed.Points, point{b.at, float64(b.failed-a.failed) / time.Duration(b.at-a.at).Seconds()})
			}
			tallied = &ss[i]
		}
	}
	for i := 1; i < len(ss); i++ {
		a, b := ss[i-1], ss[i]
		secs := time.Duration(b.at - a.at).Seconds()
		if secs <= 0 {
			continue
		}
		n, o, d := flow(a, b)
		in.Points = append(in.Points, point{b.at, n / secs})
		out.Points = append(out.Points, point{b.at, max(0, o-d) / secs})
		dead.Points = append(dead.Points, point{b.at, d / secs})
	}
	return []series{in, out, dead, failed}
}

// thin keeps about n of ss, evenly in time: the first, the first sample in each
// of n-1 equal steps of the time after it, and the last. A kept sample's depths and
// age are the largest of the samples it stands for, so that a short peak still
// shows; its counters are its own, so that the rates between kept samples are the
// exact averages over their time.
func thin(ss []sample, n int) []sample {
	if len(ss) <= n || n < 2 {
		return ss
	}
	from := ss[0].at
	step := max((ss[len(ss)-1].at-from)/int64(n-1), 1)
	out := make([]sample, 1, n+1)
	out[0] = ss[0]
	next := from + step // where the next step starts
	var peak sample
	for i, s := range ss[1:] {
		peak.pending, peak.running = max(peak.pending, s.pending), max(peak.running, s.running)
		peak.retrying, peak.oldest = max(peak.retrying, s.retrying), max(peak.oldest, s.oldest)
		if s.at < next && i < len(ss)-2 {
			continue
		}
		s.pending, s.running, s.retrying, s.oldest = peak.pending, peak.running, peak.retrying, peak.oldest
		out = append(out, s)
		peak = sample{}
		next = from + ((s.at-from)/step+1)*step
	}
	return out
}

// perSecond formats a rate: "2.5/s".
func perSecond(v float64) string { return short(v) + "/s" }

// count formats a number of jobs.
func count(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

// age formats an age in seconds: "3m12s".
func age(v float64) string { return shortDuration(time.Duration(v * float64(time.Second))) }

// short formats v with two decimals below 10, one below 100, none above, without
// trailing zeros.
func short(v float64) string {
	prec := 0
	switch {
	case v < 10:
		prec = 2
	case v < 100:
		prec = 1
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if prec > 0 {
		s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	}
	return s
}
