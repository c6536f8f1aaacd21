package ui

import (
	"net/http"
	"strconv"

	"github.com/workq/workq/admin"
)

// deadPerPage is how many dead letters a page of the list shows, oldest first.
const deadPerPage = 200

// deadView is the dead-letter list.
type deadView struct {
	Queue   string
	Total   uint64
	Letters []admin.DeadLetter
	ID      string // the job id filtered on, if any
	After   uint64 // the page starts after this sequence
	Next    uint64 // the next page starts after this one; 0: no next page
}

// deadPage lists a queue's dead letters, oldest first, a page at a time (after=seq),
// or those of one job id.
func (h *handler) deadPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	qi, ok := h.queue(w, r, name)
	if !ok {
		return
	}
	v := deadView{Queue: name, Total: qi.Dead, ID: r.URL.Query().Get("id")}
	v.After, _ = strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	limit := deadPerPage + 1 // one more tells whether there is a next page
	if v.ID != "" {
		limit = 0 // the job's letters may be anywhere
	}
	ds, err := h.adm.DeadLettersAfter(r.Context(), name, v.After, limit, false)
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	if v.ID == "" && len(ds) > deadPerPage {
		ds = ds[:deadPerPage]
		v.Next = ds[len(ds)-1].Sequence
	}
	for _, d := range ds {
		if v.ID == "" || d.JobID == v.ID {
			v.Letters = append(v.Letters, d)
		}
	}
	h.render(w, r, http.StatusOK, "dead", "Dead letters of "+name, v)
}

// deadLetterView is one dead letter's page.
type deadLetterView struct {
	Queue   string
	Letter  *admin.DeadLetter
	Headers []header
	Payload Preview
}

// deadLetterPage shows one dead letter with its payload and headers.
func (h *handler) deadLetterPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		h.fail(w, r, http.StatusNotFound, "no such dead letter: want its sequence number")
		return
	}
	d, err := h.adm.DeadLetter(r.Context(), name, seq)
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "deadletter", "Dead letter "+strconv.FormatUint(seq, 10), deadLetterView{
		Queue: name, Letter: d, Headers: headersOf(d.Header), Payload: preview(d.Payload),
	})
}

// confirmView asks to confirm an action that acts on many at once.
type confirmView struct {
	Queue  string
	Action string // the form's path under the prefix
	Verb   string
	Count  uint64
	Fields map[string]string
	Back   string
}

// requeueDead requeues the dead letters selected (seq fields), or all of them
// (all=1) once confirmed.
func (h *handler) requeueDead(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	var sel admin.Selection
	if r.PostFormValue("all") == "1" {
		if r.PostFormValue("confirm") != "1" {
			h.confirm(w, r, name, "/queues/"+pathEscape(name)+"/dead/requeue", "Requeue every dead letter of", map[string]string{"all": "1"})
			return
		}
		sel.All = true
	} else {
		for _, s := range r.PostForm["seq"] {
			seq, err := strconv.ParseUint(s, 10, 64)
			if err != nil || seq == 0 {
				h.fail(w, r, http.StatusBadRequest, "bad dead-letter sequence "+strconv.Quote(s))
				return
			}
			sel.Sequences = append(sel.Sequences, seq)
		}
		if len(sel.Sequences) == 0 {
			h.fail(w, r, http.StatusBadRequest, "no dead letter selected")
			return
		}
	}
	done, err := h.adm.RequeueDead(r.Context(), name, sel, nil)
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	h.cfg.logger.Info("ui: dead letters requeued", "queue", name, "selection", sel.String(), "requeued", len(done), "remote", r.RemoteAddr)
	h.redirect(w, r, "/queues/"+pathEscape(name)+"/dead", "requeued", len(done))
}

// purgeDead deletes every dead letter of the queue once confirmed.
func (h *handler) purgeDead(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if r.PostFormValue("confirm") != "1" {
		h.confirm(w, r, name, "/queues/"+pathEscape(name)+"/dead/purge", "Delete every dead letter of", nil)
		return
	}
	n, err := h.adm.PurgeDead(r.Context(), name)
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	h.cfg.logger.Info("ui: dead letters purged", "queue", name, "purged", n, "remote", r.RemoteAddr)
	h.redirect(w, r, "/queues/"+pathEscape(name)+"/dead", "purged", int(n))
}

// confirm renders the page that repeats an action with confirm=1.
func (h *handler) confirm(w http.ResponseWriter, r *http.Request, name, action, verb string, fields map[string]string) {
	qi, ok := h.queue(w, r, name)
	if !ok {
		return
	}
	h.render(w, r, http.StatusOK, "confirm", "Confirm", confirmView{
		Queue: name, Action: action, Verb: verb, Count: qi.Dead, Fields: fields, Back: "/queues/" + pathEscape(name) + "/dead",
	})
}
