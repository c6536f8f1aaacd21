package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
)

// queueRow is a queue as the tables show it.
type queueRow struct {
	admin.QueueInfo
	Rate  Rate
	Spark chart // the queues page's: its flow over its history
}

// queuesPage lists every queue with its numbers; its table refreshes itself.
func (h *handler) queuesPage(w http.ResponseWriter, r *http.Request) {
	qs, at, err := h.snap.queues(r.Context(), h.adm)
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	live := map[string]bool{}
	rows := make([]queueRow, len(qs))
	for i, q := range qs {
		live[q.Name] = true
		rows[i] = queueRow{QueueInfo: q, Rate: h.hist.observe(q, at, nil), Spark: sparkline(q.Name, h.hist.samples(q.Name))}
	}
	h.hist.forget(live)
	h.render(w, r, http.StatusOK, "queues", "Queues", rows)
}

// queueView is the queue page: the queue, a page of its jobs and the query.
type queueView struct {
	Queue    queueRow
	Jobs     *admin.JobPage
	State    string
	Kind     string
	Cursor   string
	States   []producer.State
	Charts   []chart      // flow, depth, oldest job's age over the queue's history
	Counts   []stateCount // the jobs with a record, by state (admin.JobCounts)
	JobsErr  string
	NotFound string // a searched id that is not there
}

// jobsPerPage is the size of a page of the job list.
const jobsPerPage = 50

// queuePage shows a queue's numbers and charts (refreshing) and its jobs, filtered
// by state and kind, a page at a time.
func (h *handler) queuePage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	qi, ok := h.queue(w, r, name)
	if !ok {
		return
	}
	v := queueView{Queue: queueRow{QueueInfo: *qi, Rate: h.hist.observe(*qi, time.Now(), nil)}, States: producer.States}
	v.Charts = queueCharts(h.hist.samples(name))
	q := r.URL.Query()
	v.State, v.Kind, v.Cursor = q.Get("state"), q.Get("kind"), q.Get("cursor")
	if !refreshing(r) { // the refresh shows the numbers and charts only
		page, err := h.adm.Jobs(r.Context(), name, admin.JobQuery{State: producer.State(v.State), Kind: v.Kind, Limit: jobsPerPage, Cursor: v.Cursor})
		if err != nil {
			v.JobsErr = err.Error()
		}
		v.Jobs = page
		if counts, err := h.adm.JobCounts(r.Context(), name); err == nil {
			v.Counts = stateCounts(counts)
		}
	}
	v.NotFound = q.Get("missing")
	h.render(w, r, http.StatusOK, "queue", "Queue "+name, v)
}

// queue reads queue name's info, answering 404 or 502 if it cannot.
func (h *handler) queue(w http.ResponseWriter, r *http.Request, name string) (*admin.QueueInfo, bool) {
	qi, err := h.adm.Queue(r.Context(), name)
	if err != nil {
		h.failFor(w, r, err)
		return nil, false
	}
	return qi, true
}

// failFor renders the error page for an admin call's error: not found (404), bad
// input (400), no answer in time (504), or the server (502).
func (h *handler) failFor(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		h.fail(w, r, http.StatusGatewayTimeout, fmt.Sprintf("the NATS server did not answer within %s: %v", h.cfg.timeout, err))
	case errors.Is(err, admin.ErrNoQueue), errors.Is(err, admin.ErrNotFound), errors.Is(err, admin.ErrNoDeadLetter):
		h.fail(w, r, http.StatusNotFound, err.Error())
	case errors.Is(err, producer.ErrInvalidName), errors.Is(err, producer.ErrInvalidOption), errors.Is(err, admin.ErrFinished),
		errors.Is(err, admin.ErrNoWorkers):
		h.fail(w, r, http.StatusBadRequest, err.Error())
	default:
		h.fail(w, r, http.StatusBadGateway, err.Error())
	}
}

// search goes to the job page of the id asked for, or back to the queue saying it
// is not there.
func (h *handler) search(w http.ResponseWriter, r *http.Request) {
	name, id := r.URL.Query().Get("queue"), r.URL.Query().Get("id")
	if name == "" || id == "" {
		h.fail(w, r, http.StatusBadRequest, "search wants a queue and a job id")
		return
	}
	if _, err := h.adm.Job(r.Context(), name, id); err != nil {
		if errors.Is(err, admin.ErrNotFound) {
			http.Redirect(w, r, h.cfg.prefix+"/queues/"+pathEscape(name)+"?missing="+url.QueryEscape(id), http.StatusSeeOther)
			return
		}
		h.failFor(w, r, err)
		return
	}
	http.Redirect(w, r, h.cfg.prefix+"/queues/"+pathEscape(name)+"/jobs/"+pathEscape(id), http.StatusSeeOther)
}

// pauseQueue and resumeQueue pause and resume a queue.
func (h *handler) pauseQueue(w http.ResponseWriter, r *http.Request) {
	h.queueAction(w, r, "paused", h.adm.PauseQueue)
}

func (h *handler) resumeQueue(w http.ResponseWriter, r *http.Request) {
	h.queueAction(w, r, "resumed", h.adm.ResumeQueue)
}

func (h *handler) queueAction(w http.ResponseWriter, r *http.Request, done string, fn func(ctx context.Context, name string) error) {
	name := r.PathValue("queue")
	if err := fn(r.Context(), name); err != nil {
		h.failFor(w, r, err)
		return
	}
	h.cfg.logger.Info("ui: queue "+done, "queue", name, "remote", r.RemoteAddr)
	h.redirect(w, r, "/queues/"+pathEscape(name), done, 0)
}
