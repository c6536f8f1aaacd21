package ui_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
	"github.com/workq/workq/ui"
)

// serveWorkflows starts a server holding fillWorkflows' workflows and serves its
// dashboard with opts.
func serveWorkflows(t *testing.T, opts ...ui.Option) (*admin.Admin, *httptest.Server) {
	t.Helper()
	js := testenv.Start(t).JetStream(t)
	fillWorkflows(t, js)
	return serveJS(t, js, opts...)
}

// serveJS serves the dashboard of js's queues with opts until the test ends.
func serveJS(t *testing.T, js jetstream.JetStream, opts ...ui.Option) (*admin.Admin, *httptest.Server) {
	t.Helper()
	adm, err := admin.New(js)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(adm, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return adm, srv
}

// svgBox is a task's box in a workflow page's graph.
type svgBox struct {
	class, href string
	x, y        int
}

var svgTask = regexp.MustCompile(`(?s)<a class="wf-task ([a-z]+)" data-task="([^"]+)" data-state="[a-z]+" href="([^"]+)"[^>]*>.*?<rect x="(\d+)" y="(\d+)"`)

// svgBoxes are the boxes of a workflow page's graph, by task.
func svgBoxes(t *testing.T, page string) map[string]svgBox {
	t.Helper()
	out := map[string]svgBox{}
	for _, m := range svgTask.FindAllStringSubmatch(page, -1) {
		x, _ := strconv.Atoi(m[4])
		y, _ := strconv.Atoi(m[5])
		out[m[2]] = svgBox{class: m[1], href: m[3], x: x, y: y}
	}
	return out
}

// dd is the text of the element data-field=field outside tables (a record's field).
func dd(page, field string) string {
	c := regexp.MustCompile(`(?s)<dd data-field="` + field + `"[^>]*>(.*?)</dd>`).FindStringSubmatch(page)
	if c == nil {
		return "<no field>"
	}
	return regexp.MustCompile(`<[^>]+>`).ReplaceAllString(c[1], "")
}

// The workflows list and a workflow's page: its state, its graph drawn as SVG (a box
// per task in columns by depth, of its state's class, linking to the task's job
// page, and an edge per dependency) and its tasks' table; the job page of a task
// links its workflow, parents and dependents. Unknown workflows are 404.
func TestWorkflowPages(t *testing.T) {
	t.Parallel()
	_, srv := serveWorkflows(t)
	c := browser(t)

	_, page, _ := get(t, c, srv.URL+"/queues/orders")
	if !strings.Contains(page, `href="/queues/orders/workflows"`) {
		t.Errorf("the queue page does not link its workflows")
	}
	_, page, _ = get(t, c, srv.URL+"/queues/orders/workflows")
	for id, want := range map[string]string{"order-1": "done", "order-2": "failed", "order-3": "running"} {
		if got := cell(page, "workflow", id, "state"); got != want {
			t.Errorf("workflows page: %s is %q; want %q", id, got, want)
		}
	}
	if got := cell(page, "workflow", "order-2", "progress"); got != "1 done, 1 dead, 1 cancelled" {
		t.Errorf("workflows page: order-2's progress %q", got)
	}
	if i1, i2, i3 := strings.Index(page, `data-workflow="order-1"`), strings.Index(page, `data-workflow="order-2"`),
		strings.Index(page, `data-workflow="order-3"`); !(i3 < i2 && i2 < i1) || strings.Count(page, "data-workflow=") != 3 {
		t.Errorf("workflows page: want order-3, order-2, order-1 (newest first), and no other")
	}
	if !strings.Contains(page, `href="/queues/orders/workflows/order-1"`) {
		t.Errorf("workflows page: no link to order-1")
	}

	// A diamond, done: a in the first column, b and c one above the other in the
	// second, d in the third; four edges; no refresh, no cancel.
	status, page, _ := get(t, c, srv.URL+"/queues/orders/workflows/order-1")
	if status != 200 || !strings.Contains(page, `<svg xmlns="http://www.w3.org/2000/svg" id="workflow-graph"`) {
		t.Fatalf("order-1: %d, no graph\n%s", status, page)
	}
	boxes := svgBoxes(t, page)
	a, b, cc, d := boxes["a"], boxes["b"], boxes["c"], boxes["d"]
	if len(boxes) != 4 || !(a.x < b.x && b.x == cc.x && cc.x < d.x) || b.y == cc.y {
		t.Errorf("order-1's boxes %+v; want a, then b and c in one column, then d", boxes)
	}
	for name, bx := range boxes {
		if bx.class != "done" || bx.href != "/queues/orders/jobs/order-1."+name {
			t.Errorf("order-1's box %s: class %q, link %q; want done, to its job page", name, bx.class, bx.href)
		}
	}
	for _, e := range []string{"a-b", "a-c", "b-d", "c-d"} {
		if !strings.Contains(page, `data-edge="`+e+`"`) {
			t.Errorf("order-1's graph has no edge %s", e)
		}
	}
	if n := strings.Count(page, "data-edge="); n != 4 {
		t.Errorf("order-1's graph has %d edges; want 4", n)
	}
	if dd(page, "state") != "done" || !strings.Contains(dd(page, "tasks"), "4: 4 done") || strings.Contains(page, "hx-get") ||
		strings.Contains(page, "Cancel workflow") {
		t.Errorf("order-1: state %q, tasks %q; want done, 4 done, no refresh, no cancel", dd(page, "state"), dd(page, "tasks"))
	}
	if got := cell(page, "task", "d", "parents"); got != "b, c" {
		t.Errorf("order-1's table: d's parents %q", got)
	}
	if !strings.Contains(page, `<a href="/queues/orders/jobs/order-1.b">b</a>`) {
		t.Errorf("order-1's table does not link d's parent b")
	}

	// A failed workflow: its boxes in their states' classes, the hostile error escaped.
	_, page, _ = get(t, c, srv.URL+"/queues/orders/workflows/order-2")
	boxes = svgBoxes(t, page)
	if boxes["charge"].class != "dead" || boxes["ship"].class != "cancelled" || boxes["notify"].class != "done" || dd(page, "state") != "failed" {
		t.Errorf("order-2: %q, boxes %+v; want failed, charge dead, ship cancelled, notify done", dd(page, "state"), boxes)
	}
	if got := cell(page, "task", "ship", "failed-parents"); got != "charge" {
		t.Errorf("order-2's table: ship's failed parents %q", got)
	}
	if strings.Contains(page, "<script>window.pwned") || !strings.Contains(page, "&lt;script&gt;window.pwned=3&lt;/script&gt;") {
		t.Errorf("order-2's page does not escape charge's error:\n%s", page)
	}

	// A running workflow refreshes in place; what waits says for what.
	_, page, _ = get(t, c, srv.URL+"/queues/orders/workflows/order-3")
	boxes = svgBoxes(t, page)
	if boxes["slow"].class != "running" || boxes["after"].class != "waiting" || !strings.Contains(page, `hx-get="/queues/orders/workflows/order-3?fragment=1"`) {
		t.Errorf("order-3: boxes %+v, or no refresh; want slow running, after waiting", boxes)
	}
	if got := cell(page, "task", "after", "waiting-for"); got != "slow" {
		t.Errorf("order-3's table: after waits for %q", got)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/queues/orders/workflows/order-3?fragment=1", nil)
	req.Header.Set("HX-Request", "true")
	if status, frag, _ := fetch(t, c, req); status != 200 || strings.Contains(frag, "<html") || !strings.HasPrefix(strings.TrimSpace(frag), `<div id="workflow"`) ||
		!strings.Contains(frag, `id="workflow-graph"`) {
		t.Errorf("order-3's refresh: %d, want the fragment alone with its graph:\n%s", status, frag)
	}

	// The job pages of tasks.
	_, page, _ = get(t, c, srv.URL+"/queues/orders/jobs/order-3.after")
	if !strings.Contains(page, `<dd data-field="workflow"><a href="/queues/orders/workflows/order-3">order-3</a>`) ||
		!strings.Contains(page, `<dd data-field="parents"><a href="/queues/orders/jobs/order-3.slow">slow</a>`) ||
		dd(page, "waiting-for") != "slow" || dd(page, "dependents") != "—" {
		t.Errorf("job page of order-3.after: no link to its workflow and parent, or not waiting for slow:\n%s", page)
	}
	_, page, _ = get(t, c, srv.URL+"/queues/orders/jobs/order-1.a")
	if dd(page, "dependents") != "b, c" || !strings.Contains(page, `<a href="/queues/orders/jobs/order-1.c">c</a>`) || dd(page, "parents") != "—" {
		t.Errorf("job page of order-1.a: dependents %q", dd(page, "dependents"))
	}
	_, page, _ = get(t, c, srv.URL+"/queues/orders/jobs/order-2.ship")
	if dd(page, "failed-parents") != "charge" {
		t.Errorf("job page of order-2.ship: failed parents %q", dd(page, "failed-parents"))
	}
	if _, page, _ = get(t, c, srv.URL+"/queues/orders/jobs/plain-1"); strings.Contains(page, `id="workflow-task"`) {
		t.Errorf("the job page of a job outside workflows shows a workflow")
	}

	for path, want := range map[string]int{
		"/queues/orders/workflows/nobody":    404,
		"/queues/nosuch/workflows":           404,
		"/queues/nosuch/workflows/order-1":   404,
		"/queues/orders/workflows/bad%20id":  400,
		"/queues/bad%20name/workflows":       400,
		"/queues/orders/workflows/order-1/x": 404,
	} {
		if status, page, _ := get(t, c, srv.URL+path); status != want {
			t.Errorf("GET %s: %d; want %d\n%s", path, status, want, page)
		}
	}
	js := testenv.Start(t).JetStream(t)
	if _, err := producer.New(testenv.Context(t, 10*time.Second), js, "empty"); err != nil {
		t.Fatal(err)
	}
	_, srvEmpty := serveJS(t, js)
	if status, page, _ := get(t, c, srvEmpty.URL+"/queues/empty/workflows"); status != 200 || !strings.Contains(page, "No workflows") {
		t.Errorf("workflows of a queue without any: %d\n%s", status, page)
	}
}

// Cancelling a running workflow from its page needs the CSRF token; read-only mode
// offers no cancel and refuses it; a workflow that has ended is not cancelled (400).
func TestWorkflowCancelFromThePage(t *testing.T) {
	t.Parallel()
	adm, srv := serveWorkflows(t)
	ctx := testenv.Context(t, 30*time.Second)
	state := func() producer.WorkflowState {
		s, err := adm.Workflow(ctx, "orders", "order-3")
		if err != nil {
			t.Fatal(err)
		}
		return s.State
	}
	c := browser(t)
	h, err := ui.New(adm, ui.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	ro := httptest.NewServer(h)
	t.Cleanup(ro.Close)
	if _, page, _ := get(t, c, ro.URL+"/queues/orders/workflows/order-3"); strings.Contains(page, `method="post"`) || strings.Contains(page, "Cancel workflow") {
		t.Errorf("read-only: the page of a running workflow offers a cancel")
	}
	if status, _, _ := post(t, c, ro.URL+"/queues/orders/workflows/order-3/cancel", url.Values{}, nil); status != http.StatusForbidden || state() != producer.WorkflowRunning {
		t.Errorf("read-only cancel: %d, %s; want 403, still running", status, state())
	}

	_, page, _ := get(t, c, srv.URL+"/queues/orders/workflows/order-3")
	if !strings.Contains(page, `action="/queues/orders/workflows/order-3/cancel"`) {
		t.Fatalf("the page of a running workflow offers no cancel:\n%s", page)
	}
	token := csrfOf(t, page)
	if status, _, _ := post(t, c, srv.URL+"/queues/orders/workflows/order-3/cancel", url.Values{}, nil); status != http.StatusForbidden || state() != producer.WorkflowRunning {
		t.Errorf("cancel without the CSRF token: %d, %s; want 403, still running", status, state())
	}
	status, _, resp := post(t, c, srv.URL+"/queues/orders/workflows/order-3/cancel", url.Values{"csrf": {token}}, nil)
	if loc := resp.Header.Get("Location"); status != http.StatusSeeOther || loc != "/queues/orders/workflows/order-3?done=workflow-cancelled&n=1" || state() != producer.WorkflowFailed {
		t.Fatalf("cancel: %d to %q, %s; want 303 to the workflow, failed", status, loc, state())
	}
	_, page, _ = get(t, c, srv.URL+resp.Header.Get("Location"))
	boxes := svgBoxes(t, page)
	if !strings.Contains(page, "Workflow cancelled") || boxes["slow"].class != "cancelled" || boxes["after"].class != "cancelled" ||
		strings.Contains(page, "Cancel workflow") || strings.Contains(page, "hx-get") {
		t.Errorf("after the cancel: boxes %+v; want the flash, both cancelled, no cancel, no refresh", boxes)
	}
	if status, page, _ := post(t, c, srv.URL+"/queues/orders/workflows/order-3/cancel", url.Values{"csrf": {token}}, nil); status != http.StatusBadRequest ||
		!strings.Contains(page, "has ended failed") {
		t.Errorf("cancel of an ended workflow: %d; want 400\n%s", status, page)
	}
	if status, _, _ := post(t, c, srv.URL+"/queues/orders/workflows/nobody/cancel", url.Values{"csrf": {token}}, nil); status != http.StatusNotFound {
		t.Errorf("cancel of an unknown workflow: %d; want 404", status)
	}
}

// A workflow of more tasks than a graph draws is listed, not drawn: the page says so
// and stays small.
func TestWorkflowTooLargeToDraw(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 60*time.Second)
	p, err := producer.New(ctx, js, "big")
	if err != nil {
		t.Fatal(err)
	}
	wf := producer.NewWorkflow("wide").Task("root", producer.Job{})
	for i := range 400 {
		wf.Task(fmt.Sprintf("t%d", i), producer.Job{}, producer.DependsOn("root"))
	}
	if _, err := p.EnqueueWorkflow(ctx, wf); err != nil {
		t.Fatal(err)
	}
	_, srv := serveJS(t, js)
	res, err := http.Get(srv.URL + "/queues/big/workflows/wide")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `id="graph-not-drawn"`) || strings.Contains(page, `id="workflow-graph"`) ||
		!strings.Contains(page, "401 tasks, more than 300") || strings.Count(page, `href="/queues/big/jobs/wide.t`) < 400 {
		t.Fatalf("status %d; a workflow of 401 tasks should be listed, not drawn (%d bytes)", res.StatusCode, len(page))
	}
}
