package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"
)

// Run runs cfg's scenarios cfg.Runs times against srv, each through workq and
// through raw JetStream, and reports the medians of each figure over the runs. It
// is `workq bench`. progress, when not nil, gets a progress line redrawn in place
// (the command passes its stderr when that is a terminal); nil keeps pipes and logs
// clean. The first scenario that fails ends the run with its error.
func Run(ctx context.Context, srv *Server, cfg Config, progress io.Writer) (Report, error) {
	rep := Report{Runs: cfg.Runs, Replicas: srv.Env.replicas(), Started: srv.started, Server: srv.desc,
		Machine: Host{CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version()}}
	env := srv.Env
	rep.GroupCommit = "auto"
	if on := cfg.GroupCommit; on != nil || srv.syncAlways {
		if on == nil { // auto on a server that fsyncs every write: on
			yes := true
			on = &yes
		}
		env.GroupCommit = on
		rep.GroupCommit = map[bool]string{true: "on", false: "off"}[*on]
	}
	env.JobTime = cfg.JobTime

	steps := plan(cfg, env)
	st := newStatus(progress, len(steps)*cfg.Runs)
	rows := map[string]*Row{}
	var order []string
	for run := 1; run <= cfg.Runs; run++ {
		for _, s := range steps {
			st.step(fmt.Sprintf("%s (run %d/%d)", s.name, run, cfg.Runs))
			out, err := s.run(ctx, st)
			if err != nil {
				st.clear()
				return rep, fmt.Errorf("bench %s: %w", s.name, err)
			}
			for _, r := range out {
				k := r.Scenario + "\x00" + r.Metric
				agg, ok := rows[k]
				if !ok {
					c := r
					c.WorkqPerRun, c.RawPerRun, c.Notes = nil, nil, nil
					agg = &c
					rows[k] = agg
					order = append(order, k)
				}
				agg.add(r)
			}
		}
	}
	st.clear()
	for _, k := range order {
		r := rows[k]
		r.finish()
		rep.Results = append(rep.Results, *r)
	}
	rep.Took = time.Since(rep.Started).Round(time.Second).String()
	return rep, nil
}
