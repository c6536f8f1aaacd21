package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Print writes the report for people, as a table: medians, the spread of the
// ratio, and whether each target was met; then the notes. (--json is for scripts:
// the Report itself.)
func (rep Report) Print(w io.Writer) error {
	fmt.Fprintf(w, "workq bench: %s; group commit %s; %d CPU(s), %s/%s, %s; %d run(s), medians; took %s\n\n",
		rep.Server, rep.GroupCommit, rep.Machine.CPUs, rep.Machine.OS, rep.Machine.Arch, rep.Machine.Go, rep.Runs, rep.Took)
	// The CLI's table layout: columns two spaces apart, an empty cell shown as "-",
	// a cell one line without tabs.
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(cells ...string) {
		for i, c := range cells {
			if c == "" {
				c = "-"
			}
			c = strings.TrimSpace(c)
			if end := strings.IndexAny(c, "\r\n"); end >= 0 {
				c = c[:end]
			}
			cells[i] = strings.ReplaceAll(c, "\t", " ")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	fmt.Fprintln(tw, "SCENARIO\tMETRIC\tWORKQ\tRAW\tRATIO\tSPREAD\tTARGET")
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
		row(r.Scenario, r.Metric, num(r.Workq), raw, rat, spread, target)
		if r.RawSame > 0 {
			row(" ", "vs raw doing the same thing", num(r.Workq), num(r.RawSame), fmt.Sprintf("%.2f", r.RatioSame), "", "")
		}
	}
	if err := tw.Flush(); err != nil {
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
