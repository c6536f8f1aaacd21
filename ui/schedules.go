package ui

import (
	"net/http"

	"github.com/workq/workq/admin"
)

// schedulesView is a queue's periodic schedules.
type schedulesView struct {
	Queue     string
	Schedules []admin.ScheduleInfo
}

// schedulesPage lists a queue's periodic schedules.
func (h *handler) schedulesPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	ss, err := h.adm.Schedules(r.Context(), name)
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "schedules", "Schedules of "+name, schedulesView{Queue: name, Schedules: ss})
}

func (h *handler) pauseSchedule(w http.ResponseWriter, r *http.Request) {
	h.scheduleAction(w, r, "schedule-paused", func(r *http.Request, q, s string) error {
		_, err := h.adm.PauseSchedule(r.Context(), q, s)
		return err
	})
}

func (h *handler) resumeSchedule(w http.ResponseWriter, r *http.Request) {
	h.scheduleAction(w, r, "schedule-resumed", func(r *http.Request, q, s string) error {
		_, err := h.adm.ResumeSchedule(r.Context(), q, s)
		return err
	})
}

func (h *handler) removeSchedule(w http.ResponseWriter, r *http.Request) {
	h.scheduleAction(w, r, "schedule-removed", func(r *http.Request, q, s string) error {
		return h.adm.RemoveSchedule(r.Context(), q, s)
	})
}

// scheduleAction runs fn on the schedule of the request's path.
func (h *handler) scheduleAction(w http.ResponseWriter, r *http.Request, done string, fn func(r *http.Request, q, s string) error) {
	q, s := r.PathValue("queue"), r.PathValue("name")
	if err := fn(r, q, s); err != nil {
		h.failFor(w, r, err)
		return
	}
	h.cfg.logger.Info("ui: "+done, "queue", q, "schedule", s, "remote", r.RemoteAddr)
	h.redirect(w, r, "/queues/"+pathEscape(q)+"/schedules", done, 1)
}
