package main

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// `job get` shows a job's last progress report and the error of each failed attempt.
func TestWriteRecordShowsProgressAndErrors(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.Local)
	rec := &admin.Record{ID: "j1", Queue: "q", State: producer.StateRetrying, Attempt: 2,
		Progress: 0.4, ProgressNote: "page 4 of 10", ProgressAt: at,
		LastError: "timeout\nstack…",
		Errors: []producer.AttemptError{
			{Attempt: 1, At: at, Error: "connection refused"},
			{Attempt: 2, At: at.Add(time.Second), Error: "timeout\nstack…"},
		}}
	var b bytes.Buffer
	if err := writeRecord(&b, rec, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^progress +40% page 4 of 10 \(at 2026-11-27 10:00:00\.000\)$`,
		`(?m)^attempt 1 failed +2026-11-27 10:00:00\.000: connection refused$`,
		`(?m)^attempt 2 failed +2026-11-27 10:00:01\.000: timeout$`,
	} {
		if !regexp.MustCompile(want).MatchString(b.String()) {
			t.Errorf("no line matching %s in:\n%s", want, b.String())
		}
	}
}
