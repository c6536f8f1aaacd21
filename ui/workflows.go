package ui

import (
	"fmt"
	"net/http"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// stateCount is how many jobs (of a queue, or tasks of a workflow) are in one state.
type stateCount struct {
	State producer.State
	N     int
}

// stateCounts lists the states with tasks in them, in the order a job goes through
// them (waiting, queued, running, …, done, dead, cancelled).
func stateCounts(counts map[producer.State]int) []stateCount {
	var out []stateCount
	for _, st := range producer.States {
		if n := counts[st]; n > 0 {
			out = append(out, stateCount{st, n})
		}
	}
	return out
}

// workflowRow is a workflow as the list shows it.
type workflowRow struct {
	admin.WorkflowSummary
	States []stateCount
}

// workflowsView is a queue's workflows.
type workflowsView struct {
	Queue     string
	Workflows []workflowRow
}

// workflowsPage lists a queue's workflows, newest first, with their tasks' states.
func (h *handler) workflowsPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	list, err := h.adm.Workflows(r.Context(), name)
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	v := workflowsView{Queue: name, Workflows: make([]workflowRow, len(list))}
	for i, s := range list {
		v.Workflows[i] = workflowRow{WorkflowSummary: s, States: stateCounts(s.Counts)}
	}
	h.render(w, r, http.StatusOK, "workflows", "Workflows of "+name, v)
}

// graphNode is a task's box in the drawing, with its record.
type graphNode struct {
	graphBox
	Rec   *admin.Record
	Label string // the name, cut to fit its box
}

// workflowView is the workflow page: the workflow, its graph and its tasks.
type workflowView struct {
	Queue  string
	Status *admin.WorkflowStatus
	States []stateCount
	Graph  graphLayout
	Nodes  []graphNode // in the order of Status.Tasks, parents first
	Active bool        // running: it can be cancelled, and the page refreshes
	// MaxDrawn is graphMaxTasks: a larger workflow's graph is not drawn (Nodes is
	// empty), only listed.
	MaxDrawn int
}

// graphMaxTasks is the most tasks a workflow's drawn graph has: a page that
// refreshes itself while the workflow runs stays small (a graph of 10 000 tasks is
// megabytes of SVG nobody can read).
const graphMaxTasks = 300

// graphLabel is the most of a task's name that fits its box, in characters.
const graphLabel = 18

// workflowPage shows a workflow: its state, its graph drawn as SVG (a box per task
// in columns by depth, coloured by state, each a link to the task's job page) and a
// table of its tasks. While it runs, the page refreshes in place.
func (h *handler) workflowPage(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("queue"), r.PathValue("id")
	s, err := h.adm.Workflow(r.Context(), name, id)
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	v := workflowView{Queue: name, Status: s, States: stateCounts(s.Counts), Active: s.State == producer.WorkflowRunning,
		MaxDrawn: graphMaxTasks}
	if len(s.Tasks) <= graphMaxTasks {
		tasks := make([]graphTask, len(s.Tasks))
		for i, t := range s.Tasks {
			tasks[i] = graphTask{Name: t.Task, Parents: t.Parents}
		}
		v.Graph = layoutGraph(tasks)
		v.Nodes = make([]graphNode, len(s.Tasks))
		for i, t := range s.Tasks {
			v.Nodes[i] = graphNode{graphBox: v.Graph.Boxes[i], Rec: t, Label: clip(t.Task, graphLabel)}
		}
	}
	h.render(w, r, http.StatusOK, "workflow", "Workflow "+id, v)
}

// cancelWorkflow cancels every task of a running workflow that has not ended; a
// workflow that has ended is not cancelled (400), as a finished job is not.
func (h *handler) cancelWorkflow(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("queue"), r.PathValue("id")
	s, err := h.adm.Workflow(r.Context(), name, id)
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	if s.State != producer.WorkflowRunning {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("workflow %s has ended %s: nothing to cancel", id, s.State))
		return
	}
	if _, err := h.adm.CancelWorkflow(r.Context(), name, id); err != nil {
		h.failFor(w, r, err)
		return
	}
	h.cfg.logger.Info("ui: workflow cancelled", "queue", name, "workflow", id, "remote", r.RemoteAddr)
	h.redirect(w, r, "/queues/"+pathEscape(name)+"/workflows/"+pathEscape(id), "workflow-cancelled", 1)
}
