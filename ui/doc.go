// Package ui is workq's web dashboard: an http.Handler that shows queues (with
// charts of their flow, depths and oldest job's age over the last hour), jobs (with
// a timeline of their attempts), workflows (each drawn as a graph of its tasks),
// dead letters, periodic schedules, locks and rate limiters, and lets an operator
// pause and resume a queue, cancel a job or a workflow, requeue and purge dead
// letters and pause, resume or remove a schedule. `workq ui` serves it; a Go
// service can mount it under a prefix of its own:
//
//	h, err := ui.New(adm, ui.Prefix("/workq"), ui.Token(os.Getenv("WORKQ_UI_TOKEN")))
//	defer h.Close()
//	mux.Handle("/workq/", h)
//
// Every page is rendered on the server from Go templates, and everything it needs
// (templates, style sheet, and the htmx library that refreshes the queue tables in
// place) is embedded in the binary: the dashboard works offline and without
// JavaScript, which only adds the refresh. It is built on package admin and does
// nothing the admin API does not. The charts are drawn on the server as inline SVG
// from a history the handler keeps itself, in memory: a background sampler reads
// every queue every SampleEvery until Close (no Prometheus needed).
//
// Safety: every action is a POST carrying a CSRF token, and cross-origin POSTs are
// refused; ReadOnly hides and refuses every action; Token and BasicAuth put the
// dashboard behind a secret. Everything shown — payloads, errors, headers, names —
// is escaped, and a strict Content-Security-Policy keeps a script that slipped
// through from running.
package ui
