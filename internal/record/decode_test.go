package record

import (
	"errors"
	"strings"
	"testing"
)

// Decode takes a value as a job's record only when it is that job's record: bytes
// that are not JSON, another job's record and fields no workq writer makes are a
// CorruptError naming the key, the revision and what is wrong.
func TestDecodeRefusesWhatIsNotThisJobsRecord(t *testing.T) {
	for _, c := range []struct {
		value, want string
	}{
		{"\x00\xffgarbage", "do not decode as a job record"},
		{`[1,2,3]`, "do not decode as a job record"},
		{`{"id":"a","queue":"q","state":"running","attempt":"two"}`, "do not decode as a job record"},
		{`{"id":"other","queue":"q","state":"done","attempt":1}`, `the record of job "other"`},
		{`{"queue":"q","state":"done","attempt":1}`, `the record of job ""`},
		{`{"id":"a","queue":"q","state":"exploded","attempt":1}`, `unknown state "exploded"`},
		{`{"id":"a","queue":"q","state":"scheduled","attempt":0}`, `unknown state "scheduled"`},
		{`{"id":"a","queue":"q","state":"running","attempt":-3}`, "negative attempt -3"},
		{`{"id":"a","queue":"q","state":"running","attempt":1,"max_attempts":-1}`, "negative max_attempts -1"},
	} {
		r, err := Decode("a", []byte(c.value), 7)
		var ce *CorruptError
		if r != nil || !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Revision != 7 || ce.ID != "a" ||
			!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "job record a at revision 7") {
			t.Errorf("Decode(%q) = %+v, %v; want a CorruptError at revision 7 saying %q", c.value, r, err, c.want)
		}
	}
	r, err := Decode("a", []byte(`{"id":"a","queue":"q","state":"done","attempt":1}`), 9)
	if err != nil || r.ID != "a" || r.State != Done || r.Revision != 9 {
		t.Errorf("Decode of a's record = %+v, %v", r, err)
	}
}

// FuzzDecode: whatever a client puts at a job's key is that job's record with
// sane fields, or an ErrCorrupt; never a panic.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","queue":"q","state":"running","attempt":2}`, `{"id":"b","state":"done"}`, `null`, `{}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode("a", b, 1)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode(%q): %v, not ErrCorrupt", b, err)
			}
			return
		}
		if r.ID != "a" || !known[r.State] || r.Attempt < 0 || r.MaxAttempts < 0 {
			t.Fatalf("Decode(%q) accepted %+v", b, r)
		}
	})
}
