package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"
)

// table writes aligned columns for people; --json is for scripts.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	fmt.Fprintln(t.tw, strings.Join(header, "\t"))
	return t
}

func (t *table) row(cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = cell(c)
	}
	fmt.Fprintln(t.tw, strings.Join(parts, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// instant is a time shown to the millisecond: when a job started, finished or is
// due again, where a second hides what happened in between.
type instant time.Time

// cell formats one value for a table: durations and times short, newlines gone.
func cell(v any) string {
	switch x := v.(type) {
	case time.Time:
		if x.IsZero() {
			return "-"
		}
		return x.Local().Format("2006-01-02 15:04:05")
	case instant:
		if time.Time(x).IsZero() {
			return "-"
		}
		return time.Time(x).Local().Format("2006-01-02 15:04:05.000")
	case time.Duration:
		return x.Round(time.Millisecond).String()
	case string:
		if x == "" {
			return "-"
		}
		return strings.ReplaceAll(oneLine(x), "\t", " ")
	}
	return fmt.Sprint(v)
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// isTerminal reports whether w is a terminal (progress bars only go there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// ago formats how long ago t was.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// truncate shortens s to n runes with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(oneLine(s))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}

// oneLine is the first line of s, trimmed: library errors can run on.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return s
}

// field is one row of a record shown as a FIELD/VALUE table.
type field struct {
	name  string
	value any
}

// writeFields prints a record for people, a row per field with its value as a
// table cell (--json is for scripts).
func writeFields(w io.Writer, fields []field) error {
	t := newTable(w, "FIELD", "VALUE")
	for _, f := range fields {
		t.row(f.name, f.value)
	}
	return t.flush()
}
