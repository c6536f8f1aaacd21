package main_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// enqueue --unique and NDJSON "unique": a second job with a key held by a waiting
// job is a duplicate naming it, in the text output, in --json and per NDJSON line;
// --unique-for without --unique is a usage error. Fails with the flag or the NDJSON
// field not passed to the producer.
func TestEnqueueUnique(t *testing.T) {
	t.Parallel()
	q := "unique-cli"
	if out := ok(t, "", "enqueue", q, "a", "--id", "first", "--unique", "k", "--unique-for", "1m"); !strings.HasPrefix(out, "enqueued first ") {
		t.Fatalf("first enqueue said %q", out)
	}
	if out := ok(t, "", "enqueue", q, "b", "--unique", "k"); !strings.HasPrefix(out, "duplicate: unique key k is held by job first ") {
		t.Errorf("second enqueue said %q", out)
	}
	out := ok(t, `{"payload":"c","unique":"k"}
{"id":"other","payload":"d","unique":"k2","unique_for":"30s"}
`, "enqueue", q, "--ndjson", "--json")
	var infos []struct {
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var info struct {
			ID        string `json:"id"`
			Duplicate bool   `json:"duplicate"`
		}
		if err := json.Unmarshal([]byte(l), &info); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		infos = append(infos, info)
	}
	if len(infos) != 2 || !infos[0].Duplicate || infos[0].ID != "first" || infos[1].Duplicate || infos[1].ID != "other" {
		t.Errorf("NDJSON results %+v, want a duplicate of first, then other enqueued", infos)
	}
	oneLine(t, wq(t, "", "enqueue", q, "x", "--unique-for", "1m"), 2, "--unique-for needs --unique")
	r := wq(t, `{"payload":"x","unique":"k3","unique_for":"soon"}
`, "enqueue", q, "--ndjson")
	if r.code != 1 || !strings.Contains(r.stderr, `unique_for "soon"`) {
		t.Errorf("exit %d, stderr %s", r.code, r.stderr)
	}
}
