package main_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchJSON is what the tests read of `workq bench --json`.
type benchJSON struct {
	Runs        int    `json:"runs"`
	Server      string `json:"server"`
	Replicas    int    `json:"replicas"`
	GroupCommit string `json:"group_commit"`
	Results     []struct {
		Scenario  string   `json:"scenario"`
		Metric    string   `json:"metric"`
		Workq     float64  `json:"workq"`
		Raw       float64  `json:"raw"`
		Ratio     float64  `json:"ratio"`
		RawSame   float64  `json:"raw_same"`
		RatioSame float64  `json:"ratio_same"`
		Notes     []string `json:"notes"`
	} `json:"results"`
}

// TestBenchScenarios runs every `workq bench` scenario once with tiny sizes against
// the test server, the backlog worker in its child process included, so that they
// keep working. It checks that figures come out, never how fast they are.
func TestBenchScenarios(t *testing.T) {
	t.Parallel()
	out := ok(t, "", "bench", "--server", serverURL, "--json",
		"--scenario", "enqueue-single,enqueue-batch,schedule-enqueue,process-unfenced,process-fenced,latency,redelivery,lock,limiter,backlog,schedule-burst",
		"--jobs", "200", "--samples", "10", "--concurrency", "4", "--redeliveries", "1", "--ack-wait", "300ms",
		"--backlog", "400", "--backlog-base", "200", "--backlog-concurrency", "4", "--backlog-prefetch", "16",
		"--burst", "200", "--burst-concurrency", "4")
	var rep benchJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output is not JSON (%v): %s", err, out)
	}
	if want := serverURL + ", R1"; rep.Server != want || rep.Replicas != 1 {
		t.Errorf("server %q, replicas %d; want %q, 1", rep.Server, rep.Replicas, want)
	}
	seen := map[string]bool{}
	scenarios := map[string]bool{}
	metrics := map[string]bool{}
	notes := map[string]string{}
	for _, r := range rep.Results {
		scenarios[r.Scenario] = true
		metrics[r.Scenario+": "+r.Metric] = true
		notes[r.Scenario] += strings.Join(r.Notes, "; ")
		if r.Workq <= 0 {
			t.Errorf("%s %s: no figure: %v", r.Scenario, r.Metric, r.Workq)
		}
		seen[strings.Fields(r.Scenario)[0]] = true
		if strings.HasPrefix(r.Metric, "worker MiB") {
			seen["rss"] = true
			continue // the worker's RSS has no raw counterpart
		}
		// Every other figure is set side by side with raw JetStream's.
		if r.Raw <= 0 {
			t.Errorf("%s %s: no raw figure: %v", r.Scenario, r.Metric, r.Raw)
		}
		// Except deep/base, where workq and raw are each their own ratio already.
		if r.Metric != "rate deep/base" && r.Ratio <= 0 {
			t.Errorf("%s %s: no ratio: %v", r.Scenario, r.Metric, r.Ratio)
		}
	}
	for _, s := range []string{"enqueue", "process", "end-to-end", "redelivery", "lock", "limiter", "backlog", "rss", "burst"} {
		if !seen[s] {
			t.Errorf("no result for %s in %s", s, out)
		}
	}

	// The lock scenario compares kvlock with both raw forms: the KV API and a bare CAS.
	// Delayed jobs are set beside raw schedules and beside workq's jobs to run at once.
	for _, s := range []string{"lock acquire+release", "lock acquire+release vs CAS", "lock handoff (4 contenders)",
		"enqueue batch scheduled", "enqueue batch scheduled vs at once (workq)",
		"enqueue single scheduled", "enqueue single scheduled vs at once (workq)"} {
		if !scenarios[s] {
			t.Errorf("no result for scenario %q in %s", s, out)
		}
	}
	for _, s := range []string{"enqueue batch scheduled vs at once (workq)", "enqueue single scheduled vs at once (workq)"} {
		if !strings.Contains(notes[s], "group commit off") {
			t.Errorf("%s: notes %q do not say the group commit", s, notes[s])
		}
	}
	// The burst: every time figure beside raw schedules' and beside both baselines,
	// each saying what its raw column holds.
	burst := map[string][]string{
		"burst 200 due at once (c=4)":                            {"first start ms", "all fired ms", "all started ms", "all done ms", "enqueue beside it, max ms"},
		"burst 200 due at once vs enqueued at once (workq, c=4)": {"first start ms", "all started ms", "all done ms"},
		"burst 200 due at once vs waiting (workq, c=4)":          {"first start ms", "all started ms", "all done ms"},
	}
	for s, ms := range burst {
		for _, m := range ms {
			if !metrics[s+": "+m] {
				t.Errorf("no %q for scenario %q in %s", m, s, out)
			}
		}
	}
	for s, what := range map[string]string{"burst 200 due at once (c=4)": "timed from the due time",
		"burst 200 due at once vs enqueued at once (workq, c=4)": "timed from the enqueue's start",
		"burst 200 due at once vs waiting (workq, c=4)":          "timed from their start"} {
		if !strings.Contains(notes[s], what) {
			t.Errorf("%s: notes %q do not say %q", s, notes[s], what)
		}
	}

	r := wq(t, "", "bench", "--scenario", "nope")
	oneLine(t, r, 2, "--scenario", "nope")
	r = wq(t, "", "bench", "--scenario", "schedule-burst", "--burst", "0")
	oneLine(t, r, 2, "--burst", "at least 1")
	r = wq(t, "", "bench", "--scenario", "schedule-burst", "--burst-lead", "-1s")
	oneLine(t, r, 2, "--burst-lead -1s")
}

// TestBenchEmbedded runs two cheap scenarios on each server `workq bench` can start
// itself — the single node fsyncing every write, and a 3-node cluster with every
// stream, bucket and consumer at R3 — and checks that the report says which server
// it was and that every figure comes out beside raw JetStream's (process-fenced also
// beside raw doing the same work), never how fast they are.
func TestBenchEmbedded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		flags       []string
		server      string
		replicas    int
		groupCommit string
	}{
		{"sync-always", []string{"--sync-always"}, "embedded, sync always (file storage in ", 1, "on"},
		{"sync-always-no-group-commit", []string{"--sync-always", "--group-commit", "off"}, "embedded, sync always (file storage in ", 1, "off"},
		{"cluster", []string{"--cluster", "3"}, "embedded 3-node cluster, R3, lazy fsync (file storage in ", 3, "auto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"bench", "--json", "--scenario", "enqueue-batch,process-fenced",
				"--jobs", "200", "--concurrency", "4"}, tc.flags...)
			out := ok(t, "", args...)
			var rep benchJSON
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("--json output is not JSON (%v): %s", err, out)
			}
			if !strings.HasPrefix(rep.Server, tc.server) || rep.Replicas != tc.replicas || rep.GroupCommit != tc.groupCommit {
				t.Errorf("server %q, replicas %d, group commit %q; want %q…, %d, %q", rep.Server, rep.Replicas, rep.GroupCommit, tc.server, tc.replicas, tc.groupCommit)
			}
			seen := map[string]bool{}
			for _, r := range rep.Results {
				seen[strings.Fields(r.Scenario)[0]+" "+strings.Fields(r.Scenario)[1]] = true
				if r.Workq <= 0 || r.Raw <= 0 || r.Ratio <= 0 {
					t.Errorf("%s %s: workq %v, raw %v, ratio %v; want all three", r.Scenario, r.Metric, r.Workq, r.Raw, r.Ratio)
				}
				// Both scenarios also measure raw doing what workq does.
				if r.RawSame <= 0 || r.RatioSame <= 0 {
					t.Errorf("%s %s: raw doing the same %v, ratio %v; want both", r.Scenario, r.Metric, r.RawSame, r.RatioSame)
				}
			}
			if !seen["enqueue batch"] || !seen["process fenced"] {
				t.Errorf("want results for enqueue batch and process fenced: %s", out)
			}
		})
	}
}

// TestBenchServerFlags: the flags that choose the server are checked before anything
// starts, each mistake in one clear line.
func TestBenchServerFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		what []string
	}{
		{[]string{"--cluster", "1"}, []string{"--cluster 1", "3 to 5"}},
		{[]string{"--cluster", "2"}, []string{"--cluster 2", "3 to 5"}},
		{[]string{"--cluster", "6"}, []string{"--cluster 6", "3 to 5"}},
		{[]string{"--replicas", "3"}, []string{"--replicas 3", "single node", "--cluster"}},
		{[]string{"--cluster", "3", "--replicas", "5"}, []string{"--replicas 5", "--cluster 3"}},
		{[]string{"--replicas", "0", "--server", serverURL}, []string{"--replicas 0", "1 to 5"}},
		{[]string{"--cluster", "3", "--server", serverURL}, []string{"--cluster", "--server"}},
		{[]string{"--sync-always", "--server", serverURL}, []string{"--sync-always", "--server"}},
	} {
		r := wq(t, "", append([]string{"bench"}, tc.args...)...)
		oneLine(t, r, 2, tc.what...)
	}
}
