package bench

import (
	"fmt"
	"slices"
	"time"
)

// Report is what Run measured, as `workq bench` prints it (a table, or JSON with
// these field names).
type Report struct {
	Server string `json:"server"`
	// Replicas of everything the scenarios created, workq's and raw's alike.
	Replicas int `json:"replicas"`
	// GroupCommit is workq's group commit in the run: on, off, or auto (the
	// library's default: on for replicated queues).
	GroupCommit string    `json:"group_commit"`
	Machine     Host      `json:"machine"`
	Runs        int       `json:"runs"`
	Started     time.Time `json:"started"`
	Took        string    `json:"took"`
	Results     []Row     `json:"results"`
}

// Host is the machine the report was made on.
type Host struct {
	CPUs int    `json:"cpus"`
	OS   string `json:"os"`
	Arch string `json:"arch"`
	Go   string `json:"go"`
}

// Row is one figure of one scenario: workq's value, raw's, and their ratio,
// the medians over the runs.
type Row struct {
	Scenario string  `json:"scenario"`
	Metric   string  `json:"metric"` // jobs/s, ops/s, p50 ms, p99 ms, max ms, MiB, x
	Workq    float64 `json:"workq"`
	Raw      float64 `json:"raw,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
	// RatioMin and RatioMax are the spread of the ratio over the runs.
	RatioMin float64 `json:"ratio_min,omitempty"`
	RatioMax float64 `json:"ratio_max,omitempty"`
	// RawSame is raw JetStream doing the same work as workq (fenced processing).
	RawSame     float64   `json:"raw_same,omitempty"`
	RatioSame   float64   `json:"ratio_same,omitempty"`
	Target      string    `json:"target,omitempty"`
	Met         *bool     `json:"met,omitempty"`
	Runs        int       `json:"runs"`
	WorkqPerRun []float64 `json:"workq_per_run"`
	RawPerRun   []float64 `json:"raw_per_run,omitempty"`
	// Notes say what the figures are where the columns do not (what the "raw"
	// column holds when it is not raw JetStream, the settings a run chose); when runs
	// said different things, each run's are prefixed with its number.
	Notes         []string         `json:"notes,omitempty"`
	check         func(r Row) bool // the target, on the medians
	ratios, sames []float64
	runNotes      [][]string
}

// add adds one run's figures of the row's scenario and metric.
func (r *Row) add(run Row) {
	r.WorkqPerRun = append(r.WorkqPerRun, run.Workq)
	if run.Raw != 0 || run.Ratio != 0 {
		r.RawPerRun = append(r.RawPerRun, run.Raw)
	}
	r.runNotes = append(r.runNotes, run.Notes)
	r.ratios = append(r.ratios, run.Ratio)
	r.sames = append(r.sames, run.RawSame)
}

// finish turns the per-run values into medians and checks the target.
func (r *Row) finish() {
	r.Runs = len(r.WorkqPerRun)
	r.Workq = median(r.WorkqPerRun)
	r.Raw = median(r.RawPerRun)
	r.Ratio = median(r.ratios)
	if len(r.ratios) > 1 {
		r.RatioMin, r.RatioMax = slices.Min(r.ratios), slices.Max(r.ratios)
	}
	r.Notes = nil
	for i, ns := range r.runNotes {
		if !slices.ContainsFunc(r.runNotes, func(o []string) bool { return !slices.Equal(o, ns) }) {
			r.Notes = ns // every run said the same
			break
		}
		for _, n := range ns {
			r.Notes = append(r.Notes, fmt.Sprintf("run %d: %s", i+1, n))
		}
	}
	r.RawSame = median(r.sames)
	if r.RawSame > 0 {
		r.RatioSame = r.Workq / r.RawSame
	}
	if r.check != nil {
		met := r.check(*r)
		r.Met = &met
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
