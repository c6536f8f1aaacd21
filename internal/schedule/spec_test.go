package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	for spec, pattern := range map[string]string{
		"@every 10s":                      "@every 10s",
		"@every 1m30s":                    "@every 1m30s",
		"  0   2 * * * ":                  "0 0 2 * * *",
		"*/15 9-17 * * mon-fri":           "0 */15 9-17 * * mon-fri",
		"0 0 1,15 jan,jul ?":              "0 0 0 1,15 jan,jul ?",
		"@hourly":                         "0 0 * * * *",
		"@daily":                          "0 0 0 * * *",
		"@midnight":                       "0 0 0 * * *",
		"@weekly":                         "0 0 0 * * 0",
		"@monthly":                        "0 0 0 1 * *",
		"@yearly":                         "0 0 0 1 1 *",
		"@annually":                       "0 0 0 1 1 *",
		"TZ=Europe/Berlin 0 2 * * *":      "0 0 2 * * *",
		"CRON_TZ=America/New_York @daily": "0 0 0 * * *",
		"TZ=UTC 5 4 * * *":                "0 5 4 * * *",
	} {
		sp, err := Parse(spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", spec, err)
			continue
		}
		if sp.Pattern() != pattern {
			t.Errorf("Parse(%q).Pattern() = %q, want %q", spec, sp.Pattern(), pattern)
		}
		if sp.Text != strings.Join(strings.Fields(spec), " ") {
			t.Errorf("Parse(%q).Text = %q", spec, sp.Text)
		}
	}
	if sp, _ := Parse("TZ=Europe/Berlin 0 2 * * *"); sp.Zone != "Europe/Berlin" {
		t.Errorf("zone %q", sp.Zone)
	}
	if sp, _ := Parse("TZ=UTC 0 2 * * *"); sp.Zone != "" {
		t.Errorf("UTC is the default zone, got %q", sp.Zone)
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for spec, says := range map[string]string{
		"":                            "empty",
		"@every 500ms":                "too often",
		"@every 1500ms":               "whole number of seconds",
		"@every soon":                 "invalid duration",
		"TZ=Europe/Berlin @every 10s": "no time zone",
		"TZ=Mars/Olympus 0 2 * * *":   "unknown time zone",
		"TZ=Local 0 2 * * *":          "unknown time zone",
		"0 0 2 * * *":                 "5 fields",
		"0 2 * *":                     "5 fields",
		"61 * * * *":                  "61",
		"0 25 * * *":                  "25",
		"0 0 31 2 *":                  "never fires",
		"@fortnightly":                "unknown descriptor",
		"x y z a b":                   "x",
	} {
		_, err := Parse(spec)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), says) {
			t.Errorf("Parse(%q) = %v; want ErrInvalid saying %q", spec, err, says)
		}
	}
}

// Next is the first firing after t; Prev of a firing's next is that firing, also
// across daylight-saving changes.
func TestNextAndPrev(t *testing.T) {
	t.Parallel()
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for _, c := range []struct {
		spec      string
		after     time.Time
		next, nxt time.Time // the first two firings after "after"
	}{
		{"0 2 * * *", time.Date(2026, 11, 23, 23, 0, 0, 0, time.UTC), time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC), time.Date(2026, 11, 25, 2, 0, 0, 0, time.UTC)},
		{"*/15 * * * *", time.Date(2026, 11, 23, 10, 7, 30, 0, time.UTC), time.Date(2026, 11, 23, 10, 15, 0, 0, time.UTC), time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)},
		{"@yearly", time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC)},
		// Spring forward in Berlin: 2026-03-29 02:00 local does not exist.
		{"TZ=Europe/Berlin 30 1 * * *", time.Date(2026, 3, 28, 12, 0, 0, 0, berlin), time.Date(2026, 3, 29, 1, 30, 0, 0, berlin), time.Date(2026, 3, 30, 1, 30, 0, 0, berlin)},
		// Fall back: 2026-10-25 has 25 hours.
		{"TZ=Europe/Berlin 0 12 * * *", time.Date(2026, 10, 24, 13, 0, 0, 0, berlin), time.Date(2026, 10, 25, 12, 0, 0, 0, berlin), time.Date(2026, 10, 26, 12, 0, 0, 0, berlin)},
	} {
		sp, err := Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := sp.Next(time.Time{}, c.after); !got.Equal(c.next) {
			t.Errorf("%s: Next(%v) = %v, want %v", c.spec, c.after, got, c.next)
		}
		if got := sp.Next(time.Time{}, c.next); !got.Equal(c.nxt) {
			t.Errorf("%s: Next(%v) = %v, want %v", c.spec, c.next, got, c.nxt)
		}
		if got := sp.Prev(c.nxt); !got.Equal(c.next) {
			t.Errorf("%s: Prev(%v) = %v, want %v", c.spec, c.nxt, got, c.next)
		}
	}
	// An interval counts from its anchor, rounded to the second, as the server does.
	sp, _ := Parse("@every 10s")
	anchor := time.Date(2026, 11, 23, 10, 0, 0, 600_000_000, time.UTC)
	if got, want := sp.Next(anchor, anchor), anchor.Round(time.Second).Add(10*time.Second); !got.Equal(want) {
		t.Errorf("first firing %v, want %v", got, want)
	}
	if got, want := sp.Next(anchor, anchor.Add(35*time.Second)), time.Date(2026, 11, 23, 10, 0, 41, 0, time.UTC); !got.Equal(want) {
		t.Errorf("firing after 35s %v, want %v", got, want)
	}
	if got, want := sp.Prev(time.Date(2026, 11, 23, 10, 0, 41, 0, time.UTC)), time.Date(2026, 11, 23, 10, 0, 31, 0, time.UTC); !got.Equal(want) {
		t.Errorf("Prev %v, want %v", got, want)
	}
}

func TestFiringID(t *testing.T) {
	t.Parallel()
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if got := FiringID("nightly", time.Date(2026, 11, 24, 3, 0, 0, 0, berlin)); got != "nightly/20261124T020000Z" {
		t.Errorf("FiringID = %q", got)
	}
	if MaxNameLen+len("/20261124T020000Z") != 200 {
		t.Errorf("MaxNameLen %d does not leave room for the time in 200", MaxNameLen)
	}
}

// Parsing never panics, and what it accepts fires: Next after now, Prev before it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"@every 10s", "0 2 * * *", "TZ=Europe/Berlin */5 1-3 1,15 jan-mar mon", "@daily", "x", "@every 1h1s", "CRON_TZ=Asia/Tokyo 0 0 29 2 *"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q): error %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		next := sp.Next(now, now)
		if !next.After(now) {
			t.Fatalf("Parse(%q): Next %v not after %v", s, next, now)
		}
		if prev := sp.Prev(next); !prev.Before(next) {
			t.Fatalf("Parse(%q): Prev(%v) = %v", s, next, prev)
		}
	})
}
