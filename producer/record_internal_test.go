package producer

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/workq/workq/internal/record"
)

// filled returns a stored record whose every field, and every field of its worker,
// holds a value of its own that is not the zero value.
func filled(t *testing.T) *record.Record {
	t.Helper()
	r := &record.Record{Worker: &record.Worker{}, Message: &record.Message{}}
	var fill func(v reflect.Value, n int)
	fill = func(v reflect.Value, n int) {
		for i := range v.NumField() {
			f, k := v.Field(i), n+i+1
			switch {
			case f.Type() == reflect.TypeFor[time.Time]():
				f.Set(reflect.ValueOf(time.Date(2026, 1, k, 10, 0, 0, k, time.UTC)))
			case f.Kind() == reflect.String:
				f.SetString("v" + string(rune('a'+k)))
			case f.CanInt():
				f.SetInt(int64(k))
			case f.CanUint():
				f.SetUint(uint64(k))
			case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Uint8:
				f.SetBytes([]byte{byte(k), 0, 0xff})
			case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
				f.Set(reflect.ValueOf([]string{"v" + string(rune('a'+k)), "w"}))
			case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
				f.Set(reflect.MakeSlice(f.Type(), 2, 2))
				fill(f.Index(0), 200+k)
				fill(f.Index(1), 300+k)
			case f.CanFloat():
				f.SetFloat(float64(k) / 1000)
			case f.Type() == reflect.TypeFor[map[string][]string]():
				f.Set(reflect.ValueOf(map[string][]string{"K" + string(rune('a'+k)): {"v", "w"}, "Z": {"z"}}))
			case f.Kind() == reflect.Bool:
				f.SetBool(true)
			case f.Kind() == reflect.Pointer && f.Elem().Kind() == reflect.Struct:
				fill(f.Elem(), 100+k)
			default:
				t.Fatalf("field %s of type %s: teach filled to set it", v.Type().Field(i).Name, f.Type())
			}
		}
	}
	fill(reflect.ValueOf(r).Elem(), 0)
	return r
}

// zeroFields lists the fields of v (a struct, and the structs in it that are not
// times) that hold their zero value.
func zeroFields(v reflect.Value, prefix string) []string {
	var zero []string
	for i := range v.NumField() {
		f, name := v.Field(i), prefix+v.Type().Field(i).Name
		if f.Kind() == reflect.Struct && f.Type() != reflect.TypeFor[time.Time]() {
			zero = append(zero, zeroFields(f, name+".")...)
		} else if f.IsZero() {
			zero = append(zero, name)
		}
	}
	return zero
}

func TestPublicRecordCarriesEveryFieldAndTheSameJSON(t *testing.T) {
	t.Parallel()
	stored := filled(t)
	pub := publicRecord(stored)
	if zero := zeroFields(reflect.ValueOf(pub).Elem(), ""); len(zero) > 0 {
		t.Fatalf("fields not carried over from the stored record: %v", zero)
	}
	if got, want := reflect.TypeFor[Record]().NumField(), reflect.TypeFor[record.Record]().NumField(); got != want {
		t.Fatalf("Record has %d fields, the stored record %d", got, want)
	}
	if pub.Revision != stored.Revision {
		t.Fatalf("revision %d, want %d", pub.Revision, stored.Revision)
	}

	// The public record encodes as the stored document, byte for byte...
	want, err := stored.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(pub)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("JSON differs from the stored document:\n got %s\nwant %s", got, want)
	}
	// ...and decodes back to itself (all but the revision and the write's time, which
	// the document lacks).
	var back Record
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	back.Revision, back.WrittenAt = pub.Revision, pub.WrittenAt
	if !reflect.DeepEqual(&back, pub) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, *pub)
	}
}

func TestPublicRecordOfAJobNotRunYet(t *testing.T) {
	t.Parallel()
	stored := &record.Record{ID: "j1", Queue: "q", State: record.Queued, Sequence: 7, EnqueuedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	pub := publicRecord(stored)
	if !pub.Worker.IsZero() || pub.Worker.Name != "" || !pub.StartedAt.IsZero() || pub.State != StateQueued || pub.State.Terminal() {
		t.Fatalf("record of a queued job: %+v", *pub)
	}
	want, _ := stored.AppendJSON(nil)
	got, _ := json.Marshal(pub)
	if string(got) != string(want) {
		t.Fatalf("JSON differs from the stored document (no worker, no times but enqueued_at):\n got %s\nwant %s", got, want)
	}
}
