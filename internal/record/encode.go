package record

import (
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends the record's JSON document to b: what json.Marshal(r) returns,
// byte for byte (TestAppendJSONMatchesMarshal), at a sixth of its cost and with no
// allocation beyond b's growth. A worker encodes a record for every claim and commit,
// and the reflective encoder was one of the largest costs of a short job. (Record
// deliberately has no MarshalJSON: encoding/json re-validates a Marshaler's output,
// which costs more than its own reflective encoding.) It fails only on a time that
// JSON cannot hold (a year outside 0–9999), as json.Marshal does.
//
// A nil b is allocated at about the document's size.
func (r *Record) AppendJSON(b []byte) ([]byte, error) {
	if b == nil {
		b = make([]byte, 0, r.sizeHint())
	}
	var err error
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"queue":`...)
	b = appendString(b, r.Queue)
	if r.Kind != "" {
		b = append(b, `,"kind":`...)
		b = appendString(b, r.Kind)
	}
	b = append(b, `,"state":`...)
	b = appendString(b, string(r.State))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	if r.MaxAttempts != 0 {
		b = append(b, `,"max_attempts":`...)
		b = strconv.AppendInt(b, int64(r.MaxAttempts), 10)
	}
	if r.Enqueue != "" {
		b = append(b, `,"enqueue":`...)
		b = appendString(b, r.Enqueue)
	}
	if r.Run != "" {
		b = append(b, `,"run":`...)
		b = appendString(b, r.Run)
	}
	if r.LeaseMS != 0 {
		b = append(b, `,"lease_ms":`...)
		b = strconv.AppendInt(b, r.LeaseMS, 10)
	}
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, r.Sequence, 10)
	if w := r.Worker; w != nil {
		b = append(b, `,"worker":{"name":`...)
		b = appendString(b, w.Name)
		b = append(b, `,"host":`...)
		b = appendString(b, w.Host)
		b = append(b, `,"pid":`...)
		b = strconv.AppendInt(b, int64(w.PID), 10)
		b = append(b, '}')
	}
	for _, t := range [...]struct {
		key string
		t   *time.Time
	}{{`,"enqueued_at":`, &r.EnqueuedAt}, {`,"started_at":`, &r.StartedAt}, {`,"finished_at":`, &r.FinishedAt}, {`,"retry_at":`, &r.RetryAt}, {`,"scheduled_at":`, &r.ScheduledAt}} {
		if t.t.IsZero() {
			continue
		}
		b = append(b, t.key...)
		b = append(b, '"')
		if b, err = t.t.AppendText(b); err != nil {
			return nil, err
		}
		b = append(b, '"')
	}
	if r.Schedule != "" {
		b = append(b, `,"schedule":`...)
		b = appendString(b, r.Schedule)
	}
	if r.LastError != "" {
		b = append(b, `,"last_error":`...)
		b = appendString(b, r.LastError)
	}
	if len(r.Errors) > 0 {
		b = append(b, `,"errors":`...)
		for i, f := range r.Errors {
			b = append(b, "[,"[min(i, 1)])
			b = append(b, `{"attempt":`...)
			b = strconv.AppendInt(b, int64(f.Attempt), 10)
			if !f.Started.IsZero() {
				b = append(b, `,"started_at":"`...)
				if b, err = f.Started.AppendText(b); err != nil {
					return nil, err
				}
				b = append(b, '"')
			}
			b = append(b, `,"at":"`...)
			if b, err = f.At.AppendText(b); err != nil {
				return nil, err
			}
			b = append(b, '"')
			if f.Worker != "" {
				b = append(b, `,"worker":`...)
				b = appendString(b, f.Worker)
			}
			b = append(b, `,"error":`...)
			b = appendString(b, f.Error)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if r.Progress != 0 {
		b = append(b, `,"progress":`...)
		b = appendFloat(b, r.Progress)
	}
	if r.ProgressMsg != "" {
		b = append(b, `,"progress_note":`...)
		b = appendString(b, r.ProgressMsg)
	}
	if !r.ProgressAt.IsZero() {
		b = append(b, `,"progress_at":"`...)
		if b, err = r.ProgressAt.AppendText(b); err != nil {
			return nil, err
		}
		b = append(b, '"')
	}
	if len(r.Result) > 0 {
		b = append(b, `,"result":"`...)
		b = base64.StdEncoding.AppendEncode(b, r.Result)
		b = append(b, '"')
	}
	if r.Workflow != "" {
		b = append(b, `,"workflow":`...)
		b = appendString(b, r.Workflow)
	}
	if r.Task != "" {
		b = append(b, `,"task":`...)
		b = appendString(b, r.Task)
	}
	for _, l := range [...]struct {
		key   string
		names []string
	}{{`,"parents":`, r.Parents}, {`,"dependents":`, r.Dependents}, {`,"waiting_for":`, r.WaitingFor}, {`,"failed_parents":`, r.FailedParents}} {
		if len(l.names) == 0 {
			continue
		}
		b = append(b, l.key...)
		for i, n := range l.names {
			b = append(b, "[,"[min(i, 1)])
			b = appendString(b, n)
		}
		b = append(b, ']')
	}
	if r.RunIfFailed {
		b = append(b, `,"run_if_parent_failed":true`...)
	}
	if m := r.Message; m != nil {
		b = appendMessage(b, m)
	}
	if r.SequenceKey != "" {
		b = append(b, `,"sequence_key":`...)
		b = appendString(b, r.SequenceKey)
	}
	if r.After != "" {
		b = append(b, `,"after":`...)
		b = appendString(b, r.After)
	}
	if r.HaltDead {
		b = append(b, `,"halt_on_dead":true`...)
	}
	if r.Halted {
		b = append(b, `,"halted":true`...)
	}
	if !r.StoredAt.IsZero() {
		b = append(b, `,"stored_at":"`...)
		if b, err = r.StoredAt.AppendText(b); err != nil {
			return nil, err
		}
		b = append(b, '"')
	}
	if len(r.Ended) > 0 {
		b = append(b, `,"ended":`...)
		for i, e := range r.Ended {
			b = append(b, "[,"[min(i, 1)])
			b = appendString(b, e)
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendMessage appends the message field's key and value.
func appendMessage(b []byte, m *Message) []byte {
	b = append(b, `,"message":{"subject":`...)
	b = appendString(b, m.Subject)
	if len(m.Header) > 0 {
		b = append(b, `,"header":`...)
		b = appendHeader(b, m.Header)
	}
	if len(m.Data) > 0 {
		b = append(b, `,"data":"`...)
		b = base64.StdEncoding.AppendEncode(b, m.Data)
		b = append(b, '"')
	}
	return append(b, '}')
}

// appendHeader appends h as encoding/json writes a map[string][]string: keys sorted,
// a nil list as null.
func appendHeader(b []byte, h map[string][]string) []byte {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		b = append(b, "{,"[min(i, 1)])
		b = appendString(b, k)
		b = append(b, ':')
		vs := h[k]
		if vs == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '[')
		for j, v := range vs {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// sizeHint is about the length of the record's JSON document, a little over unless its
// strings need escaping or its numbers are huge (b then grows as usual): the keys,
// quotes and numbers take under 300 bytes, each time 37.
func (r *Record) sizeHint() int {
	n := 300 + 5*37 + len(r.ID) + len(r.Queue) + len(r.Kind) + len(r.Enqueue) + len(r.Run) + len(r.State) + len(r.Schedule) + len(r.LastError) + base64.StdEncoding.EncodedLen(len(r.Result))
	if w := r.Worker; w != nil {
		n += len(w.Name) + len(w.Host)
	}
	for _, f := range r.Errors {
		n += 80 + len(f.Error)
	}
	if m := r.Message; m != nil {
		n += 40 + len(m.Subject) + base64.StdEncoding.EncodedLen(len(m.Data))
		for k, vs := range m.Header {
			n += len(k) + 5
			for _, v := range vs {
				n += len(v) + 3
			}
		}
	}
	n += 60 + len(r.SequenceKey) + len(r.After)
	if !r.StoredAt.IsZero() {
		n += 50
	}
	for _, e := range r.Ended {
		n += len(e) + 3
	}
	if r.Workflow != "" {
		n += 120 + len(r.Workflow) + len(r.Task)
		for _, l := range [...][]string{r.Parents, r.Dependents, r.WaitingFor, r.FailedParents} {
			for _, s := range l {
				n += len(s) + 3
			}
		}
	}
	return n
}

// appendFloat appends f as encoding/json writes a float64 (which the record's
// progress, between 0 and 1, always is: no exponent below 1e-6 in practice, but the
// same rule for any value).
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string escaped as encoding/json escapes it by
// default: HTML's <, > and & too, U+2028 and U+2029, and invalid UTF-8 as U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
