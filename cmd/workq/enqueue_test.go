package main

import (
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestEnqueueValidate(t *testing.T) {
	t.Parallel()
	checkValidate(t, []validateCase{
		{"payload argument", &enqueueFlags{queue: "q", payload: "x", hasPayload: true}, ""},
		{"lines of stdin", &enqueueFlags{queue: "q", ndjson: true, jsonOut: true}, ""},
		{"header without =", &enqueueFlags{queue: "q", headers: []string{"a=1", "b"}}, `--header "b": want key=value`},
		{"header without key", &enqueueFlags{queue: "q", headers: []string{" =1"}}, `--header " =1": want key=value`},
		{"header key with a colon", &enqueueFlags{queue: "q", headers: []string{"a:b=1"}}, `--header "a:b=1": want key=value`},
		{"header key with a space", &enqueueFlags{queue: "q", headers: []string{"a b=1"}}, `--header "a b=1": want key=value`},
		{"negative max attempts", &enqueueFlags{queue: "q", maxAttempts: -1}, "--max-attempts -1: want ≥ 1"},
		{"payload and --file", &enqueueFlags{queue: "q", hasPayload: true, file: "jobs"}, "give the payload as an argument or with --file/stdin, not both"},
		{"payload and --raw", &enqueueFlags{queue: "q", hasPayload: true, raw: true}, "give the payload as an argument or with --file/stdin, not both"},
		{"payload and --ndjson", &enqueueFlags{queue: "q", hasPayload: true, ndjson: true}, "give the payload as an argument or with --file/stdin, not both"},
		{"raw and ndjson", &enqueueFlags{queue: "q", raw: true, ndjson: true}, "--raw and --ndjson exclude each other"},
		{"json and quiet", &enqueueFlags{queue: "q", jsonOut: true, quiet: true}, "--json and --quiet exclude each other"},
	})
}

// validate parses --header into the header every job carries: repeated keys
// keep every value, a value may hold '='.
func TestEnqueueValidateParsesHeaders(t *testing.T) {
	t.Parallel()
	f := &enqueueFlags{queue: "q", headers: []string{"A=1", "A=2", "B=x=y"}}
	if err := f.validate(); err != nil {
		t.Fatal(err)
	}
	want := nats.Header{"A": {"1", "2"}, "B": {"x=y"}}
	if !reflect.DeepEqual(f.header, want) {
		t.Errorf("header = %v, want %v", f.header, want)
	}
	if b := f.base(); !reflect.DeepEqual(b.Header, want) {
		t.Errorf("base job's header = %v, want %v", b.Header, want)
	}
}
