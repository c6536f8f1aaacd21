package ui

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/workq/workq/admin"
)

// jobView is the job page.
type jobView struct {
	Queue    string
	Record   *admin.Record
	Message  *admin.JobMessage
	MsgNote  string // why there is no message
	Headers  []header
	Payload  Preview
	Result   Preview
	Active   bool // not finished: it can be cancelled
	Timeline timeline
}

type header struct{ Name, Value string }

// headersOf lists a message's headers, sorted by name.
func headersOf(h map[string][]string) []header {
	var out []header
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, header{k, v})
		}
	}
	slices.SortStableFunc(out, func(a, b header) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// jobPage shows a job's record and, while the stream holds it, its message.
func (h *handler) jobPage(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("queue"), r.PathValue("id")
	rec, err := h.adm.Job(r.Context(), name, id)
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	v := jobView{Queue: name, Record: rec, Result: preview(rec.Result), Timeline: timelineOf(rec, time.Now())}
	switch rec.State {
	case "done", "dead", "cancelled":
	default:
		v.Active = true
	}
	m, err := h.adm.JobMessage(r.Context(), name, id)
	switch {
	case err == nil:
		v.Message, v.Headers, v.Payload = m, headersOf(m.Header), preview(m.Payload)
	case errors.Is(err, admin.ErrNotFound):
		v.MsgNote = "The job's message has left the queue's stream: the job finished."
		if rec.State == "dead" {
			v.MsgNote += " Its payload is in its dead letter."
		}
	default:
		v.MsgNote = "Could not read the job's message: " + err.Error()
	}
	h.render(w, r, http.StatusOK, "job", "Job "+id, v)
}

// cancelJob cancels a job.
func (h *handler) cancelJob(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("queue"), r.PathValue("id")
	if _, err := h.adm.CancelJob(r.Context(), name, id); err != nil {
		h.failFor(w, r, err)
		return
	}
	h.cfg.logger.Info("ui: job cancelled", "queue", name, "job", id, "remote", r.RemoteAddr)
	h.redirect(w, r, "/queues/"+pathEscape(name)+"/jobs/"+pathEscape(id), "cancelled", 1)
}
