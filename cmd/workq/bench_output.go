package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// printBench prints the report as a table: medians, the spread of the ratio, and
// whether each target was met.
func printBench(w io.Writer, rep benchReport) error {
	fmt.Fprintf(w, "workq bench: %s; group commit %s; %d CPU(s), %s/%s, %s; %d run(s), medians; took %s\n\n",
		rep.Server, rep.GroupCommit, rep.Machine.CPUs, rep.Machine.OS, rep.Machine.Arch, rep.Machine.Go, rep.Runs, rep.Took)
	t := newTable(w, "SCENARIO", "METRIC", "WORKQ", "RAW", "RATIO", "SPREAD", "TARGET")
	for _, r := range rep.Results {
		raw, rat, spread := "-", "-", "-"
		if len(r.RawPerRun) > 0 {
			raw = num(r.Raw)
		}
		if r.Ratio > 0 {
			rat = fmt.Sprintf("%.2f", r.Ratio)
		}
		if r.RatioMax > 0 {
			spread = fmt.Sprintf("%.2f–%.2f", r.RatioMin, r.RatioMax)
		}
		target := r.Target
		if r.Met != nil {
			if *r.Met {
				target = "met: " + target
			} else {
				target = "MISSED: " + target
			}
		}
		t.row(r.Scenario, r.Metric, num(r.Workq), raw, rat, spread, target)
		if r.RawSame > 0 {
			t.row(" ", "vs raw doing the same thing", num(r.Workq), num(r.RawSame), fmt.Sprintf("%.2f", r.RatioSame), "", "")
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nThroughput ratio = workq/raw (higher is better); latency ratio = workq/raw p50 (lower is better).")
	for _, r := range rep.Results {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "%s: %s\n", r.Scenario, n)
		}
	}
	return nil
}

// num prints a figure with sensible precision.
func num(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x >= 1000:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

// status is the progress indicator of `workq bench` on a terminal: which step of
// how many, the current phase and the time it has taken so far. Elsewhere it is
// silent, so that pipes and CI logs stay clean.
type status struct {
	w     io.Writer
	on    bool
	total int

	mu    sync.Mutex
	n     int
	name  string
	ph    string
	since time.Time
	stop  chan struct{}
}

func newStatus(w io.Writer, total int) *status {
	s := &status{w: w, on: isTerminal(w), total: total}
	if s.on {
		s.stop = make(chan struct{})
		go func() {
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-s.stop:
					return
				case <-t.C:
					s.draw()
				}
			}
		}()
	}
	return s
}

func (s *status) step(name string) {
	s.mu.Lock()
	s.n++
	s.name, s.ph, s.since = name, "", time.Now()
	s.mu.Unlock()
	s.draw()
}

// phase names what a long step is doing now.
func (s *status) phase(p string) {
	s.mu.Lock()
	s.ph = p
	s.mu.Unlock()
	s.draw()
}

func (s *status) draw() {
	if !s.on {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	line := fmt.Sprintf("[%d/%d] %s", s.n, s.total, s.name)
	if s.ph != "" {
		line += ": " + s.ph
	}
	line += fmt.Sprintf(" … %ds", int(time.Since(s.since).Seconds()))
	fmt.Fprintf(s.w, "\r\x1b[2K%s", strings.TrimSpace(line))
}

func (s *status) clear() {
	if !s.on {
		return
	}
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprint(s.w, "\r\x1b[2K")
}
