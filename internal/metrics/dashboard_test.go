package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/metrics"
	"github.com/workq/workq/kvlock"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// dashboardExprs returns every PromQL expression of the dashboard: panel targets
// (rows included) and template variable queries.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not a dashboard: %v", path, err)
	}
	type panel struct {
		Type    string            `json:"type"`
		Title   string            `json:"title"`
		Panels  []json.RawMessage `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var exprs []string
	var walk func(raw []json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("panel: %v", err)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no queries", p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q has an empty query", p.Title)
				}
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var s string
		var o struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &s) == nil {
			exprs = append(exprs, s)
		} else if json.Unmarshal(v.Query, &o) == nil {
			exprs = append(exprs, o.Query)
		}
	}
	return exprs
}

var metricName = regexp.MustCompile(`\bworkq_[A-Za-z0-9_:]*`)

// Every metric the Grafana dashboard queries is exported by a process that uses a
// producer, a worker, a locker and the queue collector, after a small run.
func TestDashboardMetricsAreExported(t *testing.T) {
	t.Parallel()
	exprs := dashboardExprs(t, "../../dashboards/workq.json")
	used := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricName.FindAllString(e, -1) {
			used[m] = true
		}
	}
	if len(used) < 20 {
		t.Fatalf("the dashboard uses only %d workq metrics: %v", len(used), used)
	}

	reg := smallRun(t)
	exported, err := metrics.Names(reg)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for m := range used {
		base := m
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(m, suffix); ok && exported[b] {
				base = b
			}
		}
		if !exported[base] {
			missing = append(missing, m)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the dashboard queries metrics nobody exports: %v", missing)
	}
	// And the other way round: every workq metric has a panel.
	var unused []string
	for m := range exported {
		if !strings.HasPrefix(m, "workq_") {
			continue
		}
		if !used[m] && !used[m+"_bucket"] && !used[m+"_count"] && !used[m+"_sum"] {
			unused = append(unused, m)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("metrics without a panel: %v", unused)
	}
}

// smallRun enqueues and processes two jobs, takes, contends for and loses a lock,
// asks a rate limiter twice, and returns the registry every part registered on.
func smallRun(t *testing.T) *prometheus.Registry {
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	reg := prometheus.NewRegistry()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	const q = "dash"
	p, err := producer.New(ctx, js, q, producer.Metrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, []byte("1"), producer.Kind("k")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.EnqueueBatch(ctx, []producer.Job{{Payload: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }),
		consumer.Metrics(reg), consumer.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	testenv.Eventually(t, 10*time.Second, "both jobs committed", func() bool { return w.Stats().Committed == 2 })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c, err := producer.NewQueueCollector(js, []string{q})
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(c)

	l, err := kvlock.New(ctx, js, kvlock.Metrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(ctx, "a"); !errors.Is(err, kvlock.ErrLocked) {
		t.Fatalf("TryAcquire of a held lock: %v, want ErrLocked", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lim, err := l.Limiter(ctx, "lim", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, err := lim.Allow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A holder cut off from the server loses its lock when its lease runs out.
	px := testenv.StartProxy(t, env.URL())
	jsP := px.JetStream(t)
	lp, err := kvlock.New(ctx, jsP, kvlock.Metrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	lost, err := lp.Acquire(ctx, "b", kvlock.TTL(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	px.Pause()
	select {
	case <-lost.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("a cut-off holder did not lose its lock")
	}
	px.Resume()
	return reg
}
