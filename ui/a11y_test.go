package ui_test

import (
	"os"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/workq/workq/ui"
)

// axe-core 4.14.1 (MPL-2.0, testdata/axe.LICENSE), the accessibility checker,
// from the npm registry: injected into each page by the test only.
const axePath = "testdata/axe.min.js"

// Every page passes axe-core's WCAG 2 A and AA rules: labels, contrast, landmarks,
// table headers, names of links and buttons.
func TestBrowserAccessibility(t *testing.T) {
	t.Parallel()
	axe, err := os.ReadFile(axePath)
	if err != nil {
		t.Fatal(err)
	}
	f := fill(t)
	fillWorkflows(t, f.js)
	srv := f.serve(t)
	tb := newTab(t)
	tb.open(srv.URL+"/queues/emails/dead", "#dead-list")
	seq := eval[string](tb, `document.querySelector('#dead-list tbody th a').textContent`)
	for _, path := range []string{
		"/", "/queues/emails", "/queues/emails/jobs/bounce-1", "/queues/reports/jobs/report-1", "/queues/emails/dead",
		"/queues/emails/dead/" + seq, "/queues/emails/schedules", "/locks", "/queues/nosuch",
		"/queues/orders/workflows", "/queues/orders/workflows/order-2", "/queues/orders/workflows/order-3", "/queues/orders/jobs/order-2.ship",
	} {
		tb.open(srv.URL+path, "main")
		eval[chromedp.Void](tb, string(axe))
		found := runAxe(t, tb)
		if found != "[]" {
			t.Errorf("%s: accessibility violations: %s", path, found)
		}
	}
	login := f.serve(t, ui.Token("t"))
	tb.open(login.URL+"/login", "#token")
	eval[chromedp.Void](tb, string(axe))
	if found := runAxe(t, tb); found != "[]" {
		t.Errorf("/login: accessibility violations: %s", found)
	}
}

// runAxe runs axe on the page and returns its violations as JSON: "[]" for none.
func runAxe(t *testing.T, tb *tab) string {
	t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})
		.then(r => JSON.stringify(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe: %v", err)
	}
	return v
}
