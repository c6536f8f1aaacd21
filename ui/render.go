package ui

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/workq/workq/admin"
)

//go:embed templates
var templateFS embed.FS

// pages are the parsed templates, one set per page: the layout, the shared parts
// and the page.
type pages struct {
	sets map[string]*template.Template
}

// shared are the templates every page's set holds: the layout and the charts.
var shared = []string{"templates/layout.html", "templates/chart.html"}

func loadPages() (*pages, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	ps := &pages{sets: map[string]*template.Template{}}
	for _, path := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(path, "templates/"), ".html")
		if slices.Contains(shared, path) {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, append(slices.Clone(shared), path)...)
		if err != nil {
			return nil, fmt.Errorf("ui: template %s: %w", name, err)
		}
		ps.sets[name] = t
	}
	return ps, nil
}

// view is what every page's template gets.
type view struct {
	Title    string
	P        string // the prefix, for links
	CSRF     string
	ReadOnly bool
	Refresh  int // milliseconds between refreshes of the live parts
	Flash    string
	Now      time.Time
	Data     any
}

// render writes page name (its "layout", or only its "fragment" for htmx's refresh
// requests) with data.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	t := h.pages.sets[name]
	v := view{
		Title: title, P: h.cfg.prefix, ReadOnly: h.cfg.readOnly, Refresh: int(h.cfg.refresh / time.Millisecond),
		Flash: flash(r), Now: time.Now(), Data: data,
	}
	if !h.cfg.readOnly {
		v.CSRF = h.csrfToken(w, r)
	}
	root := "layout"
	if refreshing(r) && t.Lookup("fragment") != nil {
		root = "fragment"
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, root, v); err != nil {
		h.cfg.logger.Error("ui: render", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// refreshing reports whether r is htmx's periodic refresh of a page's live part
// (its "fragment"), which needs only that part's data.
func refreshing(r *http.Request) bool {
	return r.Header.Get("HX-Request") == "true" && r.URL.Query().Get("fragment") != ""
}

// fail renders the error page.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if status >= 500 {
		h.cfg.logger.Error("ui: request failed", "method", r.Method, "path", r.URL.Path, "err", msg)
	}
	h.render(w, r, status, "error", http.StatusText(status), errorView{Status: status, Message: msg})
}

type errorView struct {
	Status  int
	Message string
}

// flashes are the messages an action's redirect may ask for: a code, so that a
// link cannot make the dashboard say anything else.
var flashes = map[string]string{
	"paused":             "Queue paused: its workers get no jobs until it is resumed.",
	"resumed":            "Queue resumed.",
	"cancelled":          "Job cancelled.",
	"workflow-cancelled": "Workflow cancelled: its tasks that had not ended will not run (again).",
	"sequence-resumed":   "Sequence resumed: its halted job runs, and the key goes on.",
	"requeued":           "Requeued %d dead letter(s).",
	"purged":             "Purged %d dead letter(s).",
	"schedule-paused":    "Schedule paused.",
	"schedule-resumed":   "Schedule resumed.",
	"schedule-removed":   "Schedule removed.",
}

func flash(r *http.Request) string {
	f, ok := flashes[r.URL.Query().Get("done")]
	if !ok {
		return ""
	}
	if strings.Contains(f, "%d") {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		return fmt.Sprintf(f, n)
	}
	return f
}

// redirect sends the browser to path (under the prefix) after an action, with the
// flash message code done and count n.
func (h *handler) redirect(w http.ResponseWriter, r *http.Request, path, done string, n int) {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	http.Redirect(w, r, h.cfg.prefix+path+sep+"done="+done+"&n="+strconv.Itoa(n), http.StatusSeeOther)
}

var funcs = template.FuncMap{
	"ago":      ago,
	"since":    since,
	"stamp":    stamp,
	"instant":  instant,
	"duration": func(d admin.Duration) string { return shortDuration(time.Duration(d)) },
	"bytes":    humanBytes,
	"pathesc":  pathEscape,
	"clip":     clip,
	"taskid":   admin.TaskID,
	"taskrefs": taskRefs,
	"percent":  func(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" },
}

// taskLinks are the names of tasks of one workflow that a page links to their job
// pages (template "tasklinks"): a task's parents, dependents, the parents it waits
// for or that failed.
type taskLinks struct {
	P, Queue, Workflow string
	Tasks              []string
}

// taskRefs gathers what template "tasklinks" needs: the prefix, the queue, the
// workflow and the tasks' names.
func taskRefs(p, queue, workflow string, tasks []string) taskLinks {
	return taskLinks{P: p, Queue: queue, Workflow: workflow, Tasks: tasks}
}

// clip cuts s to its first line and at most n characters.
func clip(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// ago is how long before now t was: "3m12s ago"; "—" for a zero time.
func ago(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return shortDuration(time.Since(t)) + " ago"
}

// since is the age of t without "ago": "3m12s"; "—" for a zero time.
func since(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return shortDuration(time.Since(t))
}

// stamp formats t in UTC to the second; "—" for a zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// instant formats t in UTC to the millisecond, for the times of one job (enqueued,
// started, finished, retry at), where a second hides what happened between them;
// "—" for a zero time.
func instant(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func shortDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

func humanBytes(n uint64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
}

// pathEscape escapes a job id or name for a path segment: ids may hold '/'.
func pathEscape(s string) string { return url.PathEscape(s) }
