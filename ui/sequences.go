package ui

import (
	"errors"
	"net/http"

	"github.com/workq/workq/admin"
)

// sequencesView is a queue's sequence keys with jobs not ended.
type sequencesView struct {
	Queue     string
	Sequences []admin.SequenceInfo
	Halted    int // keys halted at a job whose predecessor died
}

// sequencesPage lists a queue's sequence keys with jobs not ended: the active job,
// how many wait and since when, and the job a key halted at with the dead job before
// it, which an operator resumes from here.
func (h *handler) sequencesPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	list, err := h.adm.Sequences(r.Context(), name)
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	v := sequencesView{Queue: name, Sequences: list}
	for _, s := range list {
		if s.Halted != "" {
			v.Halted++
		}
	}
	h.render(w, r, http.StatusOK, "sequences", "Sequences of "+name, v)
}

// resumeSequence resumes a halted key (the form's "key"): its halted job runs.
func (h *handler) resumeSequence(w http.ResponseWriter, r *http.Request) {
	name, key := r.PathValue("queue"), r.PostFormValue("key")
	rec, err := h.adm.ResumeSequence(r.Context(), name, key)
	if errors.Is(err, admin.ErrNotHalted) {
		h.fail(w, r, http.StatusBadRequest, "sequence "+key+" is not halted: nothing to resume")
		return
	}
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	h.cfg.logger.Info("ui: sequence resumed", "queue", name, "key", key, "job", rec.ID, "remote", r.RemoteAddr)
	h.redirect(w, r, "/queues/"+pathEscape(name)+"/sequences", "sequence-resumed", 1)
}
