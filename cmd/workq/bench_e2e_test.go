package main_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchScenarios runs every `workq bench` scenario once with tiny sizes against
// the test server, the backlog worker in its child process included, so that they
// keep working. It checks that figures come out, never how fast they are.
func TestBenchScenarios(t *testing.T) {
	out := ok(t, "", "bench", "--server", serverURL, "--json",
		"--scenario", "enqueue-single,enqueue-batch,process-unfenced,process-fenced,latency,redelivery,lock,limiter,backlog",
		"--jobs", "200", "--samples", "10", "--concurrency", "4", "--redeliveries", "1", "--ack-wait", "300ms",
		"--backlog", "400", "--backlog-base", "200", "--backlog-concurrency", "4", "--backlog-prefetch", "16")
	var rep struct {
		Runs    int `json:"runs"`
		Results []struct {
			Scenario string  `json:"scenario"`
			Metric   string  `json:"metric"`
			Workq    float64 `json:"workq"`
			Raw      float64 `json:"raw"`
			Ratio    float64 `json:"ratio"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output is not JSON (%v): %s", err, out)
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
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
	for _, s := range []string{"enqueue", "process", "end-to-end", "redelivery", "lock", "limiter", "backlog", "rss"} {
		if !seen[s] {
			t.Errorf("no result for %s in %s", s, out)
		}
	}

	r := wq(t, "", "bench", "--scenario", "nope")
	oneLine(t, r, 2, "--scenario", "nope")
}
