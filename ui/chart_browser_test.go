package ui_test

import (
	"encoding/json"
	"fmt"
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
	runSlowWorker(t, f.js, "renders", 150*time.Millisecond, 2)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	start := time.Now()
	for _, q := range []struct {
		name   string
		period func(time.Duration) time.Duration // between jobs, after so long
	}{
		{"reports", func(time.Duration) time.Duration { return 250 * time.Millisecond }},
		{"renders", func(d time.Duration) time.Duration {
			if d < 3*time.Second {
				return 40 * time.Millisecond // a burst of 25 a second for 3 s
			}
			return 250 * time.Millisecond
		}},
	} {
		p, err := producer.New(ctx, f.js, q.name)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(q.period(time.Since(start))):
				}
				if _, err := p.Enqueue(ctx, []byte(`{"page":1}`), producer.ID(fmt.Sprintf("%s-%d", q.name, i))); err != nil {
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
	lines := linesOf(tb, "#charts figure[data-chart]")
	for _, name := range []string{"rates/in", "rates/out", "rates/dead", "depth/waiting", "depth/running", "depth/retrying", "age/oldest"} {
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
