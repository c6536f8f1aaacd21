package main

import (
	"testing"

	"github.com/workq/workq/producer"
)

// An input line, NDJSON or not, becomes a job or a line's error, never a panic; the
// job it becomes carries only what the enqueue accepts (priority 0 to 4, attempts
// ≥ 0, no negative unique_for), and a plain line is its own payload.
func FuzzParseJobLine(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","payload":{"x":1},"kind":"k","headers":{"H":["1","2"]},"max_attempts":3,"priority":4,"after":"10s","unique":"u","unique_for":"1h"}`,
		`{"payload_base64":"aGk="}`, `{"payload":"text"}`, `{"at":"2026-11-24T02:00:00Z"}`, `{"headers":{"a":1}}`,
		`{"priority":9}`, `{}`, `null`, `[]`, `{"id":"x"} trailing`, "plain line", "",
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, line []byte, ndjson bool) {
		in := parseJobLine(line, 7, producer.Job{Kind: "base"}, ndjson)
		if in.line != 7 {
			t.Fatalf("line number %d, want 7", in.line)
		}
		if in.err != nil {
			return
		}
		j := in.job
		if !ndjson && string(j.Payload) != string(line) {
			t.Fatalf("plain line %q became payload %q", line, j.Payload)
		}
		if j.Priority < 0 || j.Priority > producer.PriorityUrgent || j.MaxAttempts < 0 || j.UniqueFor < 0 {
			t.Fatalf("line %q accepted as %+v", line, j)
		}
	})
}
