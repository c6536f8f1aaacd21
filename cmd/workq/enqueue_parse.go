package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/producer"
)

// jobInput is one job read from the input, or why it could not be read.
type jobInput struct {
	line int
	job  producer.Job
	err  error
}

// ndjsonJob is a line of --ndjson input.
type ndjsonJob struct {
	ID            string          `json:"id"`
	Kind          string          `json:"kind"`
	Headers       map[string]any  `json:"headers"`
	Payload       json.RawMessage `json:"payload"`
	PayloadBase64 string          `json:"payload_base64"`
	MaxAttempts   int             `json:"max_attempts"`
	Priority      priorityArg     `json:"priority"`   // low … urgent, or 1 … 4; 0 or absent: --priority
	At            string          `json:"at"`         // RFC 3339: delay the job until then
	After         string          `json:"after"`      // a duration: delay the job by it
	Unique        string          `json:"unique"`     // the job's unique key
	UniqueFor     string          `json:"unique_for"` // a duration: keep the unique key held after the job ended
	Sequence      string          `json:"sequence"`   // the job's sequence key
	HaltOnDead    *bool           `json:"halt_on_dead"`
}

// parseJobLine turns one input line into a job: the line is the payload, or with
// ndjson a JSON object describing the job.
func parseJobLine(line []byte, n int, base producer.Job, ndjson bool) jobInput {
	j := base
	if base.Header != nil {
		j.Header = nats.Header(http.Header(base.Header).Clone())
	}
	if !ndjson {
		j.Payload = append([]byte(nil), line...)
		return jobInput{line: n, job: j}
	}
	var nj ndjsonJob
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nj); err != nil {
		return jobInput{line: n, err: fmt.Errorf("not a job object: %v", err)}
	}
	switch {
	case nj.PayloadBase64 != "" && len(nj.Payload) > 0:
		return jobInput{line: n, err: errors.New("payload and payload_base64 exclude each other")}
	case nj.PayloadBase64 != "":
		b, err := base64.StdEncoding.DecodeString(nj.PayloadBase64)
		if err != nil {
			return jobInput{line: n, err: fmt.Errorf("payload_base64: %v", err)}
		}
		j.Payload = b
	case len(nj.Payload) > 0 && nj.Payload[0] == '"':
		var s string
		if err := json.Unmarshal(nj.Payload, &s); err != nil {
			return jobInput{line: n, err: fmt.Errorf("payload: %v", err)}
		}
		j.Payload = []byte(s)
	case len(nj.Payload) > 0 && string(nj.Payload) != "null":
		j.Payload = []byte(nj.Payload)
	}
	if nj.ID != "" {
		j.ID = nj.ID
	}
	if nj.Kind != "" {
		j.Kind = nj.Kind
	}
	if nj.MaxAttempts < 0 {
		return jobInput{line: n, err: fmt.Errorf("max_attempts %d: want ≥ 1", nj.MaxAttempts)}
	}
	if nj.MaxAttempts > 0 {
		j.MaxAttempts = nj.MaxAttempts
	}
	if nj.Priority != 0 {
		j.Priority = int(nj.Priority)
	}
	switch {
	case nj.At != "" && nj.After != "":
		return jobInput{line: n, err: errors.New("at and after exclude each other")}
	case nj.At != "":
		t, err := time.Parse(time.RFC3339Nano, nj.At)
		if err != nil {
			return jobInput{line: n, err: fmt.Errorf("at %q: want an RFC 3339 time such as 2026-11-24T02:00:00Z", nj.At)}
		}
		j.At = t
	case nj.After != "":
		d, err := time.ParseDuration(nj.After)
		if err != nil || d < 0 {
			return jobInput{line: n, err: fmt.Errorf("after %q: want a positive duration such as 90s or 10m", nj.After)}
		}
		j.At = time.Now().Add(d)
	}
	if nj.Unique != "" {
		j.Unique = nj.Unique
	}
	if nj.Sequence != "" {
		j.Sequence = nj.Sequence
	}
	if nj.HaltOnDead != nil {
		j.HaltOnDead = *nj.HaltOnDead
	}
	if nj.UniqueFor != "" {
		d, err := time.ParseDuration(nj.UniqueFor)
		if err != nil || d < 0 {
			return jobInput{line: n, err: fmt.Errorf("unique_for %q: want a positive duration such as 90s or 1h", nj.UniqueFor)}
		}
		j.UniqueFor = d
	}
	for k, v := range nj.Headers {
		if j.Header == nil {
			j.Header = nats.Header{}
		}
		switch x := v.(type) {
		case string:
			j.Header.Add(k, x)
		case []any:
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					return jobInput{line: n, err: fmt.Errorf("header %s: want strings", k)}
				}
				j.Header.Add(k, s)
			}
		default:
			return jobInput{line: n, err: fmt.Errorf("header %s: want a string or a list of strings", k)}
		}
	}
	return jobInput{line: n, job: j}
}
