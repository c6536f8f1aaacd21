package producer

import (
	"errors"
	"testing"
	"time"
)

// A job list cursor comes from a caller (a URL, a CLI flag): any string parses or is
// ErrInvalidOption, never panics, and a cursor the listing made reads back as the
// position it stands for.
func FuzzParseCursor(f *testing.F) {
	f.Add("")
	f.Add(cursorOf(ListedJob{Record: Record{ID: "job-1"}, Updated: time.Unix(0, 1_700_000_000_000_000_000)}))
	f.Add("MTcwMDAwMDAwMDAwMDAwMDAwMCBqb2ItMQ")
	f.Add("!!")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseCursor(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("parseCursor(%q): %v does not wrap ErrInvalidOption", s, err)
			}
			return
		}
		if s == "" {
			return
		}
		if again := cursorOf(ListedJob{Record: Record{ID: c.id}, Updated: c.at}); again != s {
			if c2, err := parseCursor(again); err != nil || c2 != c {
				t.Fatalf("cursor %q reads as %+v, which writes %q, which reads as %+v, %v", s, c, again, c2, err)
			}
		}
	})
}
