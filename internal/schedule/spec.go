// Package schedule parses the schedules of periodic jobs and computes their firing
// times. A spec is what a user writes; the server fires it from a message schedule
// (the Nats-Schedule header, server 2.12+), and workers name each firing after the
// time it stands for, computed here from what the server wrote on the fired message.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // zones resolve the same on a machine without a zoneinfo database

	"github.com/robfig/cron/v3"
)

// ErrInvalid is the cause of every rejected spec.
var ErrInvalid = errors.New("invalid schedule")

// MinEvery is the shortest interval of an "@every" spec: the server fires schedules
// at most once a second.
const MinEvery = time.Second

// Spec is a parsed schedule: either a fixed interval (Every) or a cron expression
// in a time zone.
type Spec struct {
	// Text is the spec as given, with blanks collapsed: what is stored and shown.
	Text string
	// Every is the interval of an "@every" spec; 0 for cron.
	Every time.Duration
	// Zone is the IANA time zone a cron spec is read in; "" for UTC.
	Zone string
	// cron is the parsed cron expression (nil for @every), in Zone.
	cron *cron.SpecSchedule
	// fields are the cron expression's five fields, descriptors expanded.
	fields string
}

// descriptors are the predefined cron schedules and their five fields.
var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// Parse reads a spec:
//
//   - "@every <duration>": a whole number of seconds, at least MinEvery ("@every 10m");
//   - five cron fields, minute hour day-of-month month day-of-week ("0 2 * * *"),
//     with lists, ranges, steps and month and weekday names;
//   - a predefined cron schedule: @hourly, @daily (or @midnight), @weekly, @monthly,
//     @yearly (or @annually).
//
// A cron spec may start with "TZ=<zone> " (or "CRON_TZ=<zone> ") to be read in an
// IANA time zone ("TZ=Europe/Berlin 0 2 * * *"); it is read in UTC otherwise. An
// interval has no time zone.
func Parse(s string) (Spec, error) {
	text := strings.Join(strings.Fields(s), " ")
	if text == "" {
		return Spec{}, fmt.Errorf("%w: empty spec; want \"@every 10m\", five cron fields such as \"0 2 * * *\", or @hourly, @daily…", ErrInvalid)
	}
	sp := Spec{Text: text}
	rest := text
	if prefix, after, ok := strings.Cut(rest, " "); ok && (strings.HasPrefix(prefix, "TZ=") || strings.HasPrefix(prefix, "CRON_TZ=")) {
		_, zone, _ := strings.Cut(prefix, "=")
		if _, err := time.LoadLocation(zone); err != nil || zone == "" || zone == "Local" {
			return Spec{}, fmt.Errorf("%w: %q: unknown time zone %q; want an IANA name such as Europe/Berlin", ErrInvalid, text, zone)
		}
		sp.Zone, rest = zone, after
		if sp.Zone == "UTC" {
			sp.Zone = ""
		}
	}
	if d, ok := strings.CutPrefix(rest, "@every "); ok {
		if sp.Zone != "" {
			return Spec{}, fmt.Errorf("%w: %q: an interval has no time zone", ErrInvalid, text)
		}
		every, err := time.ParseDuration(d)
		switch {
		case err != nil:
			return Spec{}, fmt.Errorf("%w: %q: %v", ErrInvalid, text, err)
		case every < MinEvery:
			return Spec{}, fmt.Errorf("%w: %q fires too often: the shortest interval is %s", ErrInvalid, text, MinEvery)
		case every%time.Second != 0:
			return Spec{}, fmt.Errorf("%w: %q: an interval is a whole number of seconds", ErrInvalid, text)
		}
		sp.Every = every
		return sp, nil
	}
	fields := rest
	if f, ok := descriptors[rest]; ok {
		fields = f
	} else if strings.HasPrefix(rest, "@") {
		return Spec{}, fmt.Errorf("%w: %q: unknown descriptor; want @every <duration>, @hourly, @daily, @midnight, @weekly, @monthly, @yearly or @annually", ErrInvalid, text)
	}
	if n := len(strings.Fields(fields)); n != 5 {
		return Spec{}, fmt.Errorf("%w: %q: a cron spec has 5 fields (minute hour day-of-month month day-of-week), not %d", ErrInvalid, text, n)
	}
	parsed, err := parser.Parse(fields)
	if err != nil {
		return Spec{}, fmt.Errorf("%w: %q: %v", ErrInvalid, text, err)
	}
	sc, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return Spec{}, fmt.Errorf("%w: %q: not a cron expression", ErrInvalid, text)
	}
	sc.Location = sp.location()
	if sc.Next(time.Now()).IsZero() {
		return Spec{}, fmt.Errorf("%w: %q never fires", ErrInvalid, text)
	}
	sp.cron, sp.fields = sc, fields
	return sp, nil
}

// location is the zone a cron spec is read in.
func (sp Spec) location() *time.Location {
	if sp.Zone == "" {
		return time.UTC
	}
	loc, err := time.LoadLocation(sp.Zone)
	if err != nil { // checked by Parse
		return time.UTC
	}
	return loc
}

// Pattern is the spec as the server's Nats-Schedule header takes it: "@every 10s",
// or the cron expression with a seconds field first (the server's cron has six
// fields). The zone goes in Nats-Schedule-Time-Zone (Zone).
func (sp Spec) Pattern() string {
	if sp.Every > 0 {
		return "@every " + sp.Every.String()
	}
	return "0 " + sp.fields
}

// Next is the first firing strictly after t. For an interval it is counted from
// anchor, the time the schedule was stored (the server fires an interval at
// anchor, rounded to the second, plus a whole number of intervals); a cron spec
// ignores anchor.
func (sp Spec) Next(anchor, t time.Time) time.Time {
	if sp.Every > 0 {
		first := anchor.Round(time.Second).Add(sp.Every)
		if first.After(t) {
			return first.UTC()
		}
		n := t.Sub(first)/sp.Every + 1
		return first.Add(n * sp.Every).UTC()
	}
	return sp.cron.Next(t).UTC()
}

// Prev is the last firing strictly before next: the firing that the server made
// when it wrote next as the one to come (the fired message's Nats-Schedule-Next). It
// names the firing, so the same firing made twice (a new stream leader firing again
// what the old one fired as it failed) gets the same name.
func (sp Spec) Prev(next time.Time) time.Time {
	if sp.Every > 0 {
		return next.Add(-sp.Every).UTC()
	}
	// Search back from next in a doubling window for the last cron time before it.
	for w := time.Minute; w <= 10*366*24*time.Hour; w *= 2 {
		var last time.Time
		for t := sp.cron.Next(next.Add(-w - time.Second)); !t.IsZero() && t.Before(next); t = sp.cron.Next(t) {
			last = t
		}
		if !last.IsZero() {
			return last.UTC()
		}
	}
	return time.Time{}
}
