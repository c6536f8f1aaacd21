package ui

import (
	"context"
	"fmt"
	"net/http"

	"github.com/workq/workq/admin"
)

// Handler is the dashboard: an http.Handler that also reads every queue's state in
// the background every SampleEvery, keeping the history its charts draw, until
// Close.
type Handler struct {
	h    *handler
	stop context.CancelFunc
	done chan struct{} // closed when the sampler has stopped
}

// ServeHTTP serves the dashboard's pages and actions.
func (d *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.h.ServeHTTP(w, r) }

// Close stops the background sampler and waits for it to end. The pages are still
// served after it, with the history kept so far and the readings they make
// themselves. Closing twice does no harm.
func (d *Handler) Close() {
	d.stop()
	<-d.done
}

// handler is the dashboard.
type handler struct {
	cfg   config
	adm   *admin.Admin
	pages *pages
	hist  *history
	snap  *snapshot
	mux   *http.ServeMux
	xorg  *http.CrossOriginProtection
}

// New returns the dashboard working through adm, with its sampler started: Close
// it when done. Options may put it under a prefix, make it read-only or put it
// behind a token or basic auth.
func New(adm *admin.Admin, opts ...Option) (*Handler, error) {
	if adm == nil {
		return nil, fmt.Errorf("ui: nil admin: %w", ErrInvalidOption)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("ui: nil option: %w", ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	ps, err := loadPages()
	if err != nil {
		return nil, err
	}
	h := &handler{cfg: cfg, adm: adm, pages: ps, hist: newHistory(cfg.sampleEvery), snap: &snapshot{ttl: cfg.refresh / 2},
		mux: http.NewServeMux(), xorg: http.NewCrossOriginProtection()}
	h.routes()
	ctx, stop := context.WithCancel(context.Background())
	d := &Handler{h: h, stop: stop, done: make(chan struct{})}
	go h.sample(ctx, d.done)
	return d, nil
}

// routes registers the pages (GET) and the actions (POST).
func (h *handler) routes() {
	get := func(pattern string, fn http.HandlerFunc) { h.mux.HandleFunc("GET "+h.cfg.prefix+pattern, fn) }
	post := func(pattern string, fn http.HandlerFunc) {
		h.mux.HandleFunc("POST "+h.cfg.prefix+pattern, h.action(fn))
	}

	h.mux.Handle("GET "+h.cfg.prefix+"/static/", staticFiles(h.cfg.prefix))
	get("/{$}", h.queuesPage)
	get("/search", h.search)
	get("/queues/{queue}", h.queuePage)
	get("/queues/{queue}/jobs/{id}", h.jobPage)
	get("/queues/{queue}/dead", h.deadPage)
	get("/queues/{queue}/dead/{seq}", h.deadLetterPage)
	get("/queues/{queue}/schedules", h.schedulesPage)
	get("/queues/{queue}/workflows", h.workflowsPage)
	get("/queues/{queue}/workflows/{id}", h.workflowPage)
	get("/queues/{queue}/sequences", h.sequencesPage)
	get("/locks", h.locksPage)
	get("/login", h.loginPage)
	h.mux.HandleFunc("POST "+h.cfg.prefix+"/login", h.login)

	post("/queues/{queue}/pause", h.pauseQueue)
	post("/queues/{queue}/resume", h.resumeQueue)
	post("/queues/{queue}/jobs/{id}/cancel", h.cancelJob)
	post("/queues/{queue}/workflows/{id}/cancel", h.cancelWorkflow)
	post("/queues/{queue}/sequences/resume", h.resumeSequence)
	post("/queues/{queue}/dead/requeue", h.requeueDead)
	post("/queues/{queue}/dead/purge", h.purgeDead)
	post("/queues/{queue}/schedules/{name}/pause", h.pauseSchedule)
	post("/queues/{queue}/schedules/{name}/resume", h.resumeSchedule)
	post("/queues/{queue}/schedules/{name}/remove", h.removeSchedule)
}

// ServeHTTP sets the security headers, checks authentication and serves.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	if !h.authenticated(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.timeout)
	defer cancel()
	h.mux.ServeHTTP(w, r.WithContext(ctx))
}

// action wraps an action's handler: refused in read-only mode, from another origin
// and without the form's CSRF token.
func (h *handler) action(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.cfg.readOnly {
			h.fail(w, r, http.StatusForbidden, "the dashboard is read-only")
			return
		}
		if err := h.xorg.Check(r); err != nil {
			h.fail(w, r, http.StatusForbidden, "cross-origin request refused")
			return
		}
		if !h.csrfValid(r) {
			h.fail(w, r, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
			return
		}
		defer h.snap.drop()
		fn(w, r)
	}
}
