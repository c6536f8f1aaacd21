package record

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// A job record is a JSON document any client can write into the bucket: whatever it
// holds decodes or is an error, never a panic, and what decodes encodes to a document
// that decodes to the same record.
func FuzzRecordJSON(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","queue":"q","state":"running","attempt":2,"max_attempts":5,"delivery":2,"epoch":7,"sequence":9,"worker":{"name":"w","host":"h","pid":1},"started_at":"2026-11-24T02:00:00Z","result":"aGk="}`,
		`{"state":"nonsense","attempt":-1}`, `{"worker":null}`, `{"result":"!!"}`, `{"id":1}`, `null`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		if json.Unmarshal(b, &r) != nil {
			return
		}
		out, err := json.Marshal(&r)
		if err != nil {
			t.Fatalf("record %q decoded to %+v, which does not encode: %v", b, r, err)
		}
		var again Record
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("record %q re-encoded as %q, which does not decode: %v", b, out, err)
		}
		if !reflect.DeepEqual(normal(r), normal(again)) {
			t.Fatalf("record %q: %+v re-encoded as %q reads as %+v", b, r, out, again)
		}
	})
}

// normal is r with what JSON does not keep apart made equal: an empty and a nil
// result, zero times written in other zones, and locations.
func normal(r Record) Record {
	if len(r.Result) == 0 {
		r.Result = nil
	}
	if m := r.Message; m != nil {
		c := *m
		if len(c.Data) == 0 {
			c.Data = nil
		}
		if len(c.Header) == 0 {
			c.Header = nil
		}
		r.Message = &c
	}
	for _, tm := range []*time.Time{&r.EnqueuedAt, &r.StartedAt, &r.FinishedAt, &r.RetryAt, &r.ScheduledAt} {
		if tm.IsZero() {
			*tm = time.Time{}
		} else {
			*tm = tm.UTC().Round(0)
		}
	}
	return r
}
