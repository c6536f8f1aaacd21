package ui_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
	"github.com/workq/workq/ui"
)

// drawnLine is a chart's line as the browser laid it out.
type drawnLine struct {
	Points int     // values in data-points
	Max    float64 // the largest
	Last   int64   // the newest's time, Unix ms
	Width  float64 // its drawn width, px
	Stroke string  // its computed stroke: the stylesheet's colour
}

// linesOf are the lines of the charts matching sel, by "chart/series".
func linesOf(tb *tab, sel string) map[string]drawnLine {
	tb.t.Helper()
	js := fmt.Sprintf(`JSON.stringify(Object.fromEntries([...document.querySelectorAll(%q)].flatMap(c =>
		[...c.querySelectorAll('polyline[data-series]')].map(l => {
			const pts = l.dataset.points.split(' ').filter(Boolean).map(p => p.split(':').map(Number));
			return [c.dataset.chart + '/' + l.dataset.series, {Points: pts.length, Max: Math.max(0, ...pts.map(p => p[1])),
				Last: pts.length ? pts[pts.length-1][0] : 0, Width: l.getBoundingClientRect().width, Stroke: getComputedStyle(l).stroke}];
		}))))`, sel)
	out := map[string]drawnLine{}
	if err := json.Unmarshal([]byte(eval[string](tb, js)), &out); err != nil {
		tb.t.Fatal(err)
	}
	return out
}

// The charts in a real browser, under the dashboard's Content-Security-Policy: the
// queue page's three charts and the queues page's sparklines are drawn, coloured by
// the stylesheet, with their points in data-points; the queue page's refresh brings
// new points in place; a job's attempts stand in order on their time axis; and no
// page logs a CSP violation or an error. The docs' screenshots of these pages are
// taken here.
func TestBrowserDashboardCharts(t *testing.T) {
	t.Parallel()
	f := fill(t)
	srv := f.serve(t, ui.Refresh(500*time.Millisecond), ui.SampleEvery(200*time.Millisecond))
	ctx := testenv.Context(t, 120*time.Second)

	// Traffic while a job fails twice, on two workers, and is done on a third: reports
	// wait (no worker); renders come in a burst faster than their worker runs them, a
	// backlog that grows, then drains as they slow down.
	//
	// Each queue's jobs keep to a schedule, due: every tick enqueues the jobs that
	// have come due since the last, in one batch, so the traffic does not depend on
	// how long an enqueue takes. (One Enqueue at a time with a pause after each ran at
	// one job per pause plus the enqueue's latency: on a loaded machine the burst
	// fell below the worker's pace, with no backlog.) The burst is all out by the
	// time runOnWorkers returns: that takes two retry backoffs at least.
	runSlowWorker(t, f.js, "renders", 150*time.Millisecond, 2)
	const burst, burstEvery, every = 3 * time.Second, 40 * time.Millisecond, 250 * time.Millisecond
	traffic := []struct {
		name string
		due  func(time.Duration) int // how many jobs are due so long after the start
		p    *producer.Producer
	}{
		{name: "reports", due: func(d time.Duration) int { return int(d / every) }},
		{name: "renders", due: func(d time.Duration) int {
			if d < burst {
				return int(d / burstEvery) // a burst of 25 a second for 3 s
			}
			return int(burst/burstEvery) + int((d-burst)/every)
		}},
	}
	for i := range traffic {
		p, err := producer.New(ctx, f.js, traffic[i].name)
		if err != nil {
			t.Fatal(err)
		}
		traffic[i].p = p
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	start := time.Now()
	for _, q := range traffic {
		wg.Go(func() {
			tick := time.NewTicker(burstEvery / 2)
			defer tick.Stop()
			for sent := 0; ; {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				due := q.due(time.Since(start))
				if due == sent {
					continue
				}
				jobs := make([]producer.Job, 0, due-sent)
				for ; sent < due; sent++ {
					jobs = append(jobs, producer.Job{Payload: []byte(`{"page":1}`), ID: fmt.Sprintf("%s-%d", q.name, sent)})
				}
				if _, err := q.p.EnqueueBatch(ctx, jobs); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	runOnWorkers(t, f.js, f.adm, "mail", "flaky-1", "worker-a", "worker-b", "worker-c")
	close(stop)
	wg.Wait()

	tb := newTab(t)
	tb.open(srv.URL+"/queues/renders", `figure[data-chart="age"] polyline[data-series="oldest"]`)
	// A chart has a point per sample of the history: the sampler's, every 200 ms if
	// a reading of the queues takes less (under -race, on an idle machine, one took
	// 165 ms in the median and up to a second), and each refresh's. How many the
	// traffic's time left depends on the machine's speed: wait for 10 through the
	// page's refresh.
	names := []string{"rates/in", "rates/out", "rates/dead", "depth/waiting", "depth/running", "depth/retrying", "age/oldest"}
	var lines map[string]drawnLine
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		lines = linesOf(tb, "#charts figure[data-chart]")
		if !slices.ContainsFunc(names, func(n string) bool { return lines[n].Points < 10 }) || time.Now().After(deadline) {
			break
		}
	}
	for _, name := range names {
		l, ok := lines[name]
		if !ok || l.Points < 10 || l.Width <= 0 || l.Stroke == "" || l.Stroke == "none" {
			t.Errorf("queue page: line %s is %+v; want 10 points or more, drawn with the stylesheet's stroke", name, l)
		}
	}
	if l := lines["rates/in"]; l.Max < 10 {
		t.Errorf("queue page: the enqueued rate peaks at %v/s; want about 25/s", l.Max)
	}
	if l := lines["depth/waiting"]; l.Max < 5 {
		t.Errorf("queue page: the waiting depth peaks at %v; want a backlog", l.Max)
	}
	if lines["rates/in"].Stroke == lines["rates/out"].Stroke {
		t.Errorf("enqueued and left are drawn in the same colour %q", lines["rates/in"].Stroke)
	}
	if got := tb.text(`figure[data-chart="rates"] text[data-axis="max"]`); !strings.HasSuffix(got, "/s") {
		t.Errorf("the rates chart's top says %q", got)
	}
	tb.screenshot("queue")

	// The summary's refresh brings the charts' new points, in place.
	eval[bool](tb, `window.workqMarker = true`)
	before := lines["depth/waiting"].Last
	testenv.Eventually(t, 10*time.Second, "the charts to refresh with a newer point", func() bool {
		return linesOf(tb, "#charts figure[data-chart]")["depth/waiting"].Last > before
	})
	if !eval[bool](tb, `window.workqMarker === true`) {
		t.Error("the page was reloaded, not updated in place")
	}

	// The history holds the points waited for above: the sparkline draws them.
	tb.open(srv.URL+"/", `tr[data-queue="reports"] svg[data-chart="spark"]`)
	spark := linesOf(tb, `tr[data-queue="renders"] svg[data-chart="spark"]`)
	if l := spark["spark/in"]; l.Points < 10 || l.Width <= 0 || l.Max < 10 {
		t.Errorf("queues page: the renders' sparkline of enqueued jobs is %+v; want 10 points or more, up to about 25/s", l)
	}
	tb.screenshot("queues")

	tb.open(srv.URL+"/queues/mail/jobs/flaky-1", "#attempts")
	var rows []struct {
		Attempt, Outcome, Worker string
		Left, Right              float64
	}
	js := `JSON.stringify([...document.querySelectorAll('#attempts tbody tr')].map(r => {
		const b = r.querySelector('rect.run').getBoundingClientRect();
		return {Attempt: r.dataset.attempt, Outcome: r.dataset.outcome, Worker: r.querySelector('[data-field=worker]').textContent, Left: b.left, Right: b.right};
	}))`
	if err := json.Unmarshal([]byte(eval[string](tb, js)), &rows); err != nil {
		t.Fatal(err)
	}
	got := ""
	for i, r := range rows {
		got += fmt.Sprintf("%s %s %s; ", r.Attempt, r.Outcome, r.Worker)
		if r.Right <= r.Left || i > 0 && r.Left < rows[i-1].Right {
			t.Errorf("attempt %s's bar spans %v to %v; want a bar right of the attempt before", r.Attempt, r.Left, r.Right)
		}
	}
	if want := "1 failed worker-a; 2 failed worker-b; 3 done worker-c; "; got != want {
		t.Errorf("job page: attempts %q; want %q", got, want)
	}
	tb.screenshot("job")

	if errs := tb.consoleErrors(); len(errs) > 0 {
		t.Errorf("the pages logged errors: %q", errs)
	}
}
