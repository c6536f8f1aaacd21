package ui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
	"github.com/workq/workq/ui"
)

// chromiumPath finds Chromium: $WORKQ_CHROMIUM, else chromium, chromium-browser or
// google-chrome on the PATH. Without one the browser tests skip, unless
// WORKQ_UI_BROWSER=required (as .ci/run sets), where they fail.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WORKQ_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium (install Debian's chromium package, or set WORKQ_CHROMIUM): the dashboard's browser tests cannot run"
	if os.Getenv("WORKQ_UI_BROWSER") == "required" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// tab is a headless Chromium tab, and the console messages its pages wrote.
type tab struct {
	t   *testing.T
	ctx context.Context

	mu      sync.Mutex
	console []string
}

func newTab(t *testing.T) *tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 860))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	tb := &tab{t: t, ctx: ctx}
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil { // starts the browser
		t.Fatalf("start Chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.console = append(tb.console, fmt.Sprintf("%s (%s)", m, m.URL))
			tb.mu.Unlock()
		}
	}()
	return tb
}

// do runs actions with a deadline.
func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// open loads path of base and waits for the selector sel.
func (tb *tab) open(url, sel string) {
	tb.t.Helper()
	tb.do("open "+url, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// eval evaluates a JavaScript expression.
func eval[T any](tb *tab, js string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// text is the trimmed text of the first element matching sel; "" if none.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return strings.TrimSpace(eval[string](tb, fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent`, sel)))
}

// click clicks sel, a link or a form's button, waits for the page that follows to
// load (it must answer 200) and then for the selector then on it.
//
// It waits for the navigation itself, not only for then: then may be on the page
// being left too (a .flash after an earlier action), and a wait for it alone ended
// at once, with the click's navigation still under way. The Navigate of the next
// open then raced it: chromedp took the form's redirect, arriving as it started, for
// its own request, and that request, cancelled by the new navigation, failed the
// open with net::ERR_ABORTED.
func (tb *tab) click(sel, then string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		tb.t.Fatalf("click %s: %v", sel, err)
	}
	if resp.Status != 200 {
		tb.t.Fatalf("click %s: the page that followed, %s, answered %d %s", sel, resp.URL, resp.Status, resp.StatusText)
	}
	tb.do("click "+sel+": wait for "+then, chromedp.WaitVisible(chromedp.CSS(then)))
}

// screenshot saves the visible page as name.png in $WORKQ_UI_SCREENSHOTS (the
// docs' pictures are made so); nothing without it.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	dir := os.Getenv("WORKQ_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// consoleErrors are the console's errors and exceptions so far: a CSP violation, a
// script that failed.
func (tb *tab) consoleErrors() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for _, m := range tb.console {
		if strings.HasPrefix(m, "error") || strings.HasPrefix(m, "exception") || strings.Contains(m, "Content Security Policy") {
			out = append(out, m)
		}
	}
	return out
}

// The dashboard in a real browser: the numbers are right and update in place, a
// hostile payload stays text, a dead letter is requeued and a queue paused from the
// page, a purge is confirmed first, and no script error or CSP violation happens.
func TestBrowserDashboard(t *testing.T) {
	t.Parallel()
	f := fill(t)
	srv := f.serve(t, ui.Refresh(500*time.Millisecond))
	tb := newTab(t)
	ctx := testenv.Context(t, 90*time.Second)

	tb.open(srv.URL+"/", `tr[data-queue="emails"]`)
	for _, want := range []struct{ queue, field, value string }{
		{"emails", "dead", "2"}, {"emails", "running", "1"}, {"emails", "retrying", "1"}, {"emails", "scheduled", "1"},
		{"reports", "waiting", "3"}, {"reports", "status", "no workers yet"},
	} {
		sel := fmt.Sprintf(`tr[data-queue=%q] td[data-field=%q]`, want.queue, want.field)
		if got := tb.text(sel); got != want.value {
			t.Errorf("queues page: %s %s = %q; want %q", want.queue, want.field, got, want.value)
		}
	}

	// The table updates itself: new jobs show without a reload (the marker set on the
	// page survives).
	eval[bool](tb, `window.workqMarker = true`)
	reports, err := producer.New(ctx, f.js, "reports")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"report-4", "report-5"} {
		if _, err := reports.Enqueue(ctx, []byte("x"), producer.ID(id)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the queues table to show 5 waiting reports", func() bool {
		return tb.text(`tr[data-queue="reports"] td[data-field="waiting"]`) == "5"
	})
	if !eval[bool](tb, `window.workqMarker === true`) {
		t.Error("the page was reloaded, not updated in place")
	}

	// A dead job with a hostile payload and error: shown, never run.
	tb.open(srv.URL+"/queues/emails/jobs/bounce-1", "#last-error")
	if got := tb.text("#last-error"); !strings.Contains(got, "<script>window.pwned=3</script>") {
		t.Errorf("job page: last error %q; want the script tag as text", got)
	}
	tb.open(srv.URL+"/queues/emails/dead", "#dead-list")
	tb.screenshot("dead-letters")
	tb.click(`tr[data-dead]:has(a[href$="/jobs/bounce-1"]) a[href*="/dead/"]`, "pre.payload")
	if got := tb.text("pre.payload"); !strings.Contains(got, hostilePayload) {
		t.Errorf("dead letter page: payload %q; want it as text", got)
	}
	if got := eval[string](tb, `String(window.pwned)`); got != "undefined" {
		t.Fatalf("a hostile payload ran: window.pwned = %s", got)
	}

	// Requeue bounce-2 from the list: it leaves the dead letters and runs again.
	f.heal()
	tb.open(srv.URL+"/queues/emails/dead", "#dead-list")
	tb.do("select bounce-2", chromedp.Click(chromedp.CSS(`tr[data-dead]:has(a[href$="/jobs/bounce-2"]) input[type=checkbox]`)))
	tb.click(`#requeue-selected button[type=submit]`, ".flash")
	if got := tb.text(".flash"); got != "Requeued 1 dead letter(s)." {
		t.Errorf("after the requeue, the page says %q", got)
	}
	testenv.Eventually(t, 10*time.Second, "bounce-2 requeued and done", func() bool {
		r, err := f.adm.Job(ctx, "emails", "bounce-2")
		qi, qerr := f.adm.Queue(ctx, "emails")
		return err == nil && qerr == nil && r.State == producer.StateDone && qi.Dead == 1
	})

	// Pause from the queue page, then resume.
	tb.open(srv.URL+"/queues/emails", "#summary")
	tb.click(`form[action$="/pause"] button`, ".flash")
	if got := tb.text(`#summary dd[data-field="status"]`); got != "paused" {
		t.Errorf("after the pause, the queue's status is %q", got)
	}
	if qi, err := f.adm.Queue(ctx, "emails"); err != nil || !qi.Paused {
		t.Fatalf("the pause from the page did not pause the queue: %+v, %v", qi, err)
	}
	tb.click(`form[action$="/resume"] button`, ".flash")
	testenv.Eventually(t, 5*time.Second, "resumed", func() bool {
		qi, err := f.adm.Queue(ctx, "emails")
		return err == nil && !qi.Paused
	})

	// Purge asks first.
	tb.open(srv.URL+"/queues/emails/dead", "#dead-list")
	tb.click(`form[action$="/dead/purge"] button`, "#confirm")
	if qi, _ := f.adm.Queue(ctx, "emails"); qi.Dead != 1 {
		t.Fatalf("the purge did not wait for its confirmation: %d dead", qi.Dead)
	}
	tb.click("#confirm", ".flash")
	if qi, _ := f.adm.Queue(ctx, "emails"); qi.Dead != 0 {
		t.Fatalf("confirmed purge left %d dead letters", qi.Dead)
	}

	tb.open(srv.URL+"/locks", `tr[data-lock="invoice-run"]`)
	if got := tb.text(`tr[data-limiter="partner-api"] td[data-field="used"]`); got != "3" {
		t.Errorf("locks page: partner-api used %q; want 3", got)
	}
	tb.screenshot("locks") // the queues, queue and job pages': TestBrowserDashboardCharts, with their charts

	// A workflow's page, with its graph (workflow_browser_test.go tests it further).
	fillWorkflows(t, f.js)
	tb.open(srv.URL+"/queues/orders/workflows/order-1", `#workflow-graph a[data-task="d"]`)

	// A narrow screen: the page does not scroll sideways (tables and the graph scroll
	// in place).
	tb.do("narrow", chromedp.EmulateViewport(390, 800))
	for _, path := range []string{"/", "/queues/emails", "/queues/emails/jobs/bounce-1", "/queues/orders/workflows/order-1"} {
		tb.open(srv.URL+path, "main")
		if wide := eval[bool](tb, `document.documentElement.scrollWidth > window.innerWidth + 1`); wide {
			t.Errorf("%s is wider than a 390 px screen", path)
		}
	}
	if errs := tb.consoleErrors(); len(errs) > 0 {
		t.Errorf("the pages logged errors: %q", errs)
	}
}

// Read-only: no page has a form that posts or a button that acts.
func TestBrowserReadOnly(t *testing.T) {
	t.Parallel()
	f := fill(t)
	srv := f.serve(t, ui.ReadOnly())
	tb := newTab(t)
	for _, path := range []string{"/", "/queues/emails", "/queues/emails/dead", "/queues/emails/jobs/slow-1", "/queues/emails/schedules", "/locks"} {
		tb.open(srv.URL+path, "main")
		if n := eval[int](tb, `document.querySelectorAll('form[method="post"], input[name="csrf"]').length`); n != 0 {
			t.Errorf("read-only %s has %d action forms", path, n)
		}
		buttons := eval[string](tb, `[...document.querySelectorAll('button')].map(b => b.textContent.trim()).join(",")`)
		for _, b := range strings.Split(buttons, ",") {
			if b != "" && b != "Find" && b != "Filter" {
				t.Errorf("read-only %s has the button %q", path, b)
			}
		}
	}
	if !strings.Contains(tb.text("header"), "read-only") {
		t.Error("the header does not say read-only")
	}
}
