package ui_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
	"github.com/workq/workq/ui"
)

// rendered is a task's box as the browser laid it out: where, and in what fill
// its state's class painted it.
type rendered struct {
	Left, Top, Right, Bottom float64
	Fill                     string
}

// boxesOf are the graph's boxes on the page, by task.
func boxesOf(tb *tab) map[string]rendered {
	tb.t.Helper()
	js := `JSON.stringify(Object.fromEntries([...document.querySelectorAll('#workflow-graph a[data-task]')].map(a => {
		const r = a.querySelector('rect'), b = r.getBoundingClientRect();
		return [a.dataset.task, {Left: b.left, Top: b.top, Right: b.right, Bottom: b.bottom, Fill: getComputedStyle(r).fill}];
	})))`
	out := map[string]rendered{}
	if err := json.Unmarshal([]byte(eval[string](tb, js)), &out); err != nil {
		tb.t.Fatal(err)
	}
	return out
}

// A workflow's graph in a real browser: the stylesheet colours each box by its
// state (no inline style, which the CSP would block), boxes stand in columns and do
// not overlap, a box is a link to its task's job page, a running workflow's page
// follows it in place until it ends, and no page logs an error or a CSP violation.
func TestBrowserWorkflow(t *testing.T) {
	t.Parallel()
	adm, srv := serveWorkflows(t, ui.Refresh(500*time.Millisecond))
	tb := newTab(t)
	ctx := testenv.Context(t, 60*time.Second)

	tb.open(srv.URL+"/queues/orders/workflows/order-2", `#workflow-graph a[data-task="notify"]`)
	bx := boxesOf(tb)
	if len(bx) != 3 || bx["charge"].Right >= bx["ship"].Left || bx["ship"].Left != bx["notify"].Left ||
		max(bx["ship"].Top, bx["notify"].Top) < min(bx["ship"].Bottom, bx["notify"].Bottom) {
		t.Errorf("order-2's boxes %+v; want charge left of ship and notify, which stand one above the other", bx)
	}
	fills := map[string]string{"charge": "rgb(255, 245, 245)", "ship": "rgb(255, 245, 245)", "notify": "rgb(230, 244, 234)"}
	for name, want := range fills {
		if bx[name].Fill != want {
			t.Errorf("order-2's box %s is filled %q; want %q (its state's colour)", name, bx[name].Fill, want)
		}
	}
	tb.screenshot("workflow")

	tb.open(srv.URL+"/queues/orders/workflows/order-1", `#workflow-graph a[data-task="d"]`)
	bx = boxesOf(tb)
	for a, ra := range bx {
		for b, rb := range bx {
			if a < b && ra.Left < rb.Right && rb.Left < ra.Right && ra.Top < rb.Bottom && rb.Top < ra.Bottom {
				t.Errorf("boxes %s %+v and %s %+v overlap", a, ra, b, rb)
			}
		}
	}
	if !(bx["a"].Right < bx["b"].Left && bx["b"].Left == bx["c"].Left && bx["c"].Right < bx["d"].Left) {
		t.Errorf("order-1's boxes %+v; want a, then b and c, then d, left to right", bx)
	}
	tb.click(`#workflow-graph a[data-task="b"]`, `#workflow-task`)
	if got := tb.text(`dd[data-field="task"]`); got != "b" {
		t.Errorf("the box of b led to the job page of task %q", got)
	}
	tb.click(`dd[data-field="workflow"] a`, `#workflow-graph`)

	// A running workflow's page follows it: cancelled elsewhere, its boxes change in
	// place (the marker set on the page survives), and the refresh stops.
	tb.open(srv.URL+"/queues/orders/workflows/order-3", `#workflow-graph a[data-task="after"]`)
	if got := tb.text(`#workflow dd[data-field="state"]`); got != "running" || boxesOf(tb)["slow"].Fill != "rgb(221, 244, 255)" {
		t.Errorf("order-3 is %q, slow filled %q; want running, in the running colour", got, boxesOf(tb)["slow"].Fill)
	}
	eval[bool](tb, `window.workqMarker = true`)
	if _, err := adm.CancelWorkflow(ctx, "orders", "order-3"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "order-3's page to show it failed, its tasks cancelled", func() bool {
		return tb.text(`#workflow dd[data-field="state"]`) == string(producer.WorkflowFailed) &&
			eval[string](tb, `document.querySelector('#workflow-graph a[data-task="after"]').dataset.state`) == "cancelled"
	})
	if !eval[bool](tb, `window.workqMarker === true`) {
		t.Error("the page was reloaded, not updated in place")
	}
	if n := eval[int](tb, `document.querySelectorAll('[hx-get], form[action$="/cancel"]').length`); n != 0 {
		t.Errorf("the page of the ended workflow still refreshes, or offers a cancel (%d elements)", n)
	}

	tb.open(srv.URL+"/queues/orders/workflows", `tr[data-workflow="order-3"]`)
	if got := tb.text(`tr[data-workflow="order-3"] td[data-field="state"]`); got != "failed" {
		t.Errorf("the workflows page shows order-3 %q", got)
	}
	if errs := tb.consoleErrors(); len(errs) > 0 {
		t.Errorf("the pages logged errors: %q", errs)
	}
}
