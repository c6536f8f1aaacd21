package ui_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
	"github.com/workq/workq/ui"
)

// browser is an HTTP client with a cookie jar that does not follow redirects.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// fetch sends req and returns the status, the body and the response.
func fetch(t *testing.T, c *http.Client, req *http.Request) (int, string, *http.Response) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp
}

func get(t *testing.T, c *http.Client, u string) (int, string, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fetch(t, c, req)
}

func post(t *testing.T, c *http.Client, u string, form url.Values, hdr map[string]string) (int, string, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return fetch(t, c, req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf is the CSRF token in a page's forms.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token in the page")
	}
	return m[1]
}

// cell is the text of the cell data-field=field in the row data-<attr>=key.
func cell(page, attr, key, field string) string {
	row := regexp.MustCompile(`(?s)<tr data-` + attr + `="` + regexp.QuoteMeta(key) + `">(.*?)</tr>`).FindStringSubmatch(page)
	if row == nil {
		return "<no row>"
	}
	c := regexp.MustCompile(`(?s)data-field="` + field + `"[^>]*>(.*?)</td>`).FindStringSubmatch(row[1])
	if c == nil {
		return "<no cell>"
	}
	return regexp.MustCompile(`<[^>]+>`).ReplaceAllString(c[1], "")
}

// The pages show what the fixture holds, escape what a job carries, and answer
// 404 or 400 for what is not there.
func TestPagesShowQueuesJobsDeadLettersLocks(t *testing.T) {
	t.Parallel()
	f := fill(t)
	srv := f.serve(t)
	c := browser(t)

	status, page, resp := get(t, c, srv.URL+"/")
	if status != 200 {
		t.Fatalf("GET /: %d\n%s", status, page)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("Content-Security-Policy = %q", csp)
	}
	for _, want := range []struct{ queue, field, value string }{
		{"emails", "dead", "2"}, {"emails", "running", "1"}, {"emails", "retrying", "1"}, {"emails", "scheduled", "1"},
		{"emails", "status", "active"}, {"reports", "waiting", "3"}, {"reports", "status", "no workers yet"},
	} {
		if got := cell(page, "queue", want.queue, want.field); got != want.value {
			t.Errorf("queues page: %s %s = %q; want %q", want.queue, want.field, got, want.value)
		}
	}

	_, page, _ = get(t, c, srv.URL+"/queues/emails")
	for _, id := range []string{"welcome-1", "welcome-2", "slow-1", "flaky-1", "bounce-1", "bounce-2", "digest", "cancel-me"} {
		if !strings.Contains(page, `data-job="`+id+`"`) {
			t.Errorf("queue page lists no job %s", id)
		}
	}
	// The counts by state, each linking to its list: the fixture's two dead jobs.
	if m := regexp.MustCompile(`(?s)<a href="/queues/emails\?state=dead#jobs" data-state="dead">dead <strong>(\d+)</strong></a>`).FindStringSubmatch(page); m == nil || m[1] != "2" {
		t.Errorf("queue page: the count of dead jobs: %v", m)
	}
	_, page, _ = get(t, c, srv.URL+"/queues/emails?state=dead")
	if n := strings.Count(page, "data-job="); n != 2 || !strings.Contains(page, `data-job="bounce-1"`) {
		t.Errorf("queue page, state dead: %d jobs listed; want bounce-1 and bounce-2", n)
	}
	if !strings.Contains(page, `<option value="dead" selected>`) {
		t.Errorf("queue page, state dead: the state filter does not show dead selected")
	}

	// A dead job with a hostile payload and error: shown as text, escaped.
	_, page, _ = get(t, c, srv.URL+"/queues/emails/jobs/bounce-1")
	if strings.Contains(page, "<script>window.pwned") || strings.Contains(page, "<img src=x") ||
		!strings.Contains(page, "&lt;script&gt;window.pwned=3&lt;/script&gt;") {
		t.Errorf("job page does not escape the error:\n%s", page)
	}
	_, page, _ = get(t, c, srv.URL+"/queues/emails/dead")
	var seq []string // bounce-1's row: the two died at about the same time, in either order
	for _, row := range strings.Split(page, "<tr ")[1:] {
		if strings.Contains(row, `/jobs/bounce-1"`) {
			seq = regexp.MustCompile(`^data-dead="(\d+)"`).FindStringSubmatch(row)
		}
	}
	if strings.Count(page, "data-dead=") != 2 || seq == nil {
		t.Fatalf("dead letters page lists %d; want 2", strings.Count(page, "data-dead="))
	}
	_, page, _ = get(t, c, srv.URL+"/queues/emails/dead/"+seq[1])
	if strings.Contains(page, "<script>window.pwned") || !strings.Contains(page, "&lt;script&gt;window.pwned=1&lt;/script&gt;&lt;img src=x") {
		t.Errorf("dead letter page does not show the payload escaped:\n%s", page)
	}
	// A failed attempt's error in the job's history, escaped too; a running job's
	// progress.
	_, page, _ = get(t, c, srv.URL+"/queues/emails/jobs/bounce-1")
	if !strings.Contains(page, `<table id="attempts" class="timeline">`) || !strings.Contains(page, "&lt;script&gt;window.pwned=3") {
		t.Errorf("dead job page: no history of failed attempts:\n%s", page)
	}
	testenv.Eventually(t, 10*time.Second, "slow-1's page to show its progress", func() bool {
		_, page, _ = get(t, c, srv.URL+"/queues/emails/jobs/slow-1")
		return regexp.MustCompile(`<dd data-field="progress"><progress value="0.4" max="1">40%</progress> 40% page 4 of 10 <span class="muted">\(at \d{4}-`).MatchString(page)
	})
	// A done job's result, pretty-printed; a queued job's binary payload as hex.
	_, page, _ = get(t, c, srv.URL+"/queues/emails/jobs/welcome-1")
	if !strings.Contains(page, "&#34;sent&#34;: true") || !strings.Contains(page, "the job finished") {
		t.Errorf("done job page: no pretty result, or no note on its message:\n%s", page)
	}
	// A job's times are to the millisecond (issue 25).
	if !regexp.MustCompile(`<dt>Started</dt><dd>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z</dd>`).MatchString(page) {
		t.Errorf("done job page: its start is not shown to the millisecond:\n%s", page)
	}
	_, page, _ = get(t, c, srv.URL+"/queues/reports/jobs/report-2")
	if !strings.Contains(page, `data-format="binary"`) || !strings.Contains(page, "00 01 fe ff 70 64 66") {
		t.Errorf("queued job page: no hex dump of the binary payload:\n%s", page)
	}
	_, page, _ = get(t, c, srv.URL+"/queues/emails/schedules")
	if cell(page, "schedule", "nightly", "status") != "active" {
		t.Errorf("schedules page: nightly not active:\n%s", page)
	}
	_, page, _ = get(t, c, srv.URL+"/locks")
	for _, want := range []string{`data-lock="invoice-run"`, `data-lock="pdf-render"`, "billing-cron"} {
		if !strings.Contains(page, want) {
			t.Errorf("locks page has no %s", want)
		}
	}
	if got := cell(page, "limiter", "partner-api", "used"); got != "3" {
		t.Errorf("locks page: partner-api used %q; want 3", got)
	}

	// 55 jobs: a page of 50, then the next of 5.
	bulk, err := producer.New(testenv.Context(t, 10*time.Second), f.js, "bulk")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 55 {
		if _, err := bulk.Enqueue(testenv.Context(t, 10*time.Second), []byte("x"), producer.ID(fmt.Sprintf("b-%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	_, page, _ = get(t, c, srv.URL+"/queues/bulk")
	next := regexp.MustCompile(`rel="next" href="([^"]+)"`).FindStringSubmatch(page)
	if n := strings.Count(page, "data-job="); n != 50 || next == nil || !strings.Contains(page, `data-job="b-54"`) {
		t.Fatalf("first page: %d jobs, next link %v; want 50 newest and a next page", n, next)
	}
	_, page, _ = get(t, c, srv.URL+strings.ReplaceAll(next[1], "&amp;", "&"))
	if n := strings.Count(page, "data-job="); n != 5 || !strings.Contains(page, `data-job="b-00"`) || strings.Contains(page, `rel="next"`) || !strings.Contains(page, "First page") {
		t.Fatalf("second page: %d jobs; want the 5 oldest, no next page, a link to the first", n)
	}

	// An id with a slash: its links escape it, and its page finds it.
	if _, err := bulk.Enqueue(testenv.Context(t, 10*time.Second), []byte("x"), producer.ID("dir/file.txt")); err != nil {
		t.Fatal(err)
	}
	_, page, _ = get(t, c, srv.URL+"/queues/bulk")
	if !strings.Contains(page, `href="/queues/bulk/jobs/dir%2Ffile.txt"`) {
		t.Errorf("the job list does not escape the slash in dir/file.txt")
	}
	if status, page, _ := get(t, c, srv.URL+"/queues/bulk/jobs/dir%2Ffile.txt"); status != 200 || !strings.Contains(page, "<h1>Job dir/file.txt</h1>") {
		t.Errorf("job page of dir/file.txt: %d", status)
	}

	// 205 dead letters: a page of 200, then the next of 5.
	for i := range 205 {
		m := &nats.Msg{Subject: "workq.bulk.dead", Data: []byte("x"), Header: nats.Header{}}
		m.Header.Set("Workq-Job-Id", fmt.Sprintf("gone-%03d", i))
		if _, err := f.js.PublishMsg(testenv.Context(t, 10*time.Second), m); err != nil {
			t.Fatal(err)
		}
	}
	_, page, _ = get(t, c, srv.URL+"/queues/bulk/dead")
	next = regexp.MustCompile(`rel="next" href="([^"]+)"`).FindStringSubmatch(page)
	if n := strings.Count(page, "data-dead="); n != 200 || next == nil || !strings.Contains(page, "205 dead letter(s)") {
		t.Fatalf("first page of dead letters: %d, next link %v; want 200 and a next page", n, next)
	}
	_, page, _ = get(t, c, srv.URL+next[1])
	if n := strings.Count(page, "data-dead="); n != 5 || !strings.Contains(page, "/jobs/gone-204") || strings.Contains(page, `rel="next"`) {
		t.Fatalf("second page of dead letters: %d; want the last 5 and no next page", n)
	}

	// Search by id.
	status, _, resp = get(t, c, srv.URL+"/search?queue=emails&id=flaky-1")
	if status != http.StatusSeeOther || resp.Header.Get("Location") != "/queues/emails/jobs/flaky-1" {
		t.Errorf("search: %d to %q", status, resp.Header.Get("Location"))
	}
	status, _, resp = get(t, c, srv.URL+"/search?queue=emails&id=nobody")
	if status != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "missing=nobody") {
		t.Errorf("search of a missing id: %d to %q", status, resp.Header.Get("Location"))
	}

	for path, want := range map[string]int{
		"/queues/nosuch":                 404,
		"/queues/emails/jobs/nobody":     404,
		"/queues/emails/dead/999":        404,
		"/queues/emails/dead/x":          404,
		"/queues/bad%20name":             400,
		"/queues/emails/jobs/bad%0Aid":   400,
		"/queues/emails/jobs/no%20one":   404, // any text is an id
		"/queues/nosuch/schedules":       404,
		"/nothing":                       404,
		"/queues/emails/jobs/a%2F..%2Fb": 404,
	} {
		if status, page, _ := get(t, c, srv.URL+path); status != want {
			t.Errorf("GET %s: %d; want %d\n%s", path, status, want, page)
		}
	}
}

// An action needs the page's CSRF token and a same-origin request; read-only mode
// offers no action and refuses them all.
func TestActionsWantCSRFAndAreRefusedReadOnly(t *testing.T) {
	t.Parallel()
	f := fill(t)
	ctx := testenv.Context(t, 30*time.Second)
	paused := func() bool {
		qi, err := f.adm.Queue(ctx, "emails")
		if err != nil {
			t.Fatal(err)
		}
		return qi.Paused
	}

	ro := f.serve(t, ui.ReadOnly())
	c := browser(t)
	for _, path := range []string{"/", "/queues/emails", "/queues/emails/dead", "/queues/emails/jobs/slow-1", "/queues/emails/schedules"} {
		if _, page, _ := get(t, c, ro.URL+path); strings.Contains(page, `method="post"`) || strings.Contains(page, "<button") && !strings.Contains(path, "emails") {
			t.Errorf("read-only %s offers an action:\n%s", path, page)
		}
	}
	_, page, _ := get(t, c, ro.URL+"/queues/emails")
	if strings.Contains(page, "Pause queue") || strings.Contains(page, `name="csrf"`) {
		t.Errorf("read-only queue page offers a pause")
	}
	status, _, _ := post(t, c, ro.URL+"/queues/emails/pause", url.Values{}, nil)
	if status != http.StatusForbidden || paused() {
		t.Errorf("read-only pause: %d, paused %v; want 403 and not paused", status, paused())
	}

	srv := f.serve(t, ui.Refresh(time.Minute)) // the queues page's reading is shared for 30 s
	get(t, c, srv.URL+"/")
	_, page, _ = get(t, c, srv.URL+"/queues/emails")
	token := csrfOf(t, page)
	status, _, _ = post(t, c, srv.URL+"/queues/emails/pause", url.Values{}, nil)
	if status != http.StatusForbidden || paused() {
		t.Errorf("pause without the CSRF token: %d, paused %v; want 403", status, paused())
	}
	status, _, _ = post(t, c, srv.URL+"/queues/emails/pause", url.Values{"csrf": {token + "x"}}, nil)
	if status != http.StatusForbidden || paused() {
		t.Errorf("pause with a wrong CSRF token: %d, paused %v; want 403", status, paused())
	}
	status, _, _ = post(t, c, srv.URL+"/queues/emails/pause", url.Values{"csrf": {token}}, map[string]string{"Sec-Fetch-Site": "cross-site"})
	if status != http.StatusForbidden || paused() {
		t.Errorf("cross-site pause: %d, paused %v; want 403", status, paused())
	}
	// Another client (a page elsewhere) without the cookie, copying a token it saw.
	status, _, _ = post(t, browser(t), srv.URL+"/queues/emails/pause", url.Values{"csrf": {token}}, nil)
	if status != http.StatusForbidden || paused() {
		t.Errorf("pause without the cookie: %d, paused %v; want 403", status, paused())
	}
	status, _, resp := post(t, c, srv.URL+"/queues/emails/pause", url.Values{"csrf": {token}}, nil)
	if status != http.StatusSeeOther || !paused() {
		t.Fatalf("pause: %d, paused %v; want 303 and paused", status, paused())
	}
	_, page, _ = get(t, c, srv.URL+resp.Header.Get("Location"))
	if !strings.Contains(page, "Queue paused") || !strings.Contains(page, "Resume queue") {
		t.Errorf("after the pause, the page says nothing of it:\n%s", page)
	}
	// The queues page shows it at once: the action dropped the shared reading.
	if _, page, _ = get(t, c, srv.URL+"/"); !strings.Contains(cell(page, "queue", "emails", "status"), "paused") {
		t.Errorf("after the pause, the queues page says %q", cell(page, "queue", "emails", "status"))
	}
	if status, _, _ = post(t, c, srv.URL+"/queues/emails/resume", url.Values{"csrf": {token}}, nil); status != http.StatusSeeOther {
		t.Errorf("resume: %d", status)
	}
	// A resume is a pause that ends 10 ms later (admin.ResumeQueue).
	testenv.Eventually(t, 5*time.Second, "resumed", func() bool { return !paused() })

	// Requeue all asks first; one dead letter, by its sequence, is requeued at once
	// (its job dies again: the fixture's bounce jobs always fail).
	status, page, _ = post(t, c, srv.URL+"/queues/emails/dead/requeue", url.Values{"csrf": {token}, "all": {"1"}}, nil)
	if qi, _ := f.adm.Queue(ctx, "emails"); status != 200 || !strings.Contains(page, `id="confirm"`) || qi.Dead != 2 {
		t.Fatalf("requeue all without confirm: %d, %d dead; want the confirmation page, 2 dead", status, qi.Dead)
	}
	dead, err := f.adm.DeadLetters(ctx, "emails", 0, false)
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead letters: %v, %v", dead, err)
	}
	status, _, resp = post(t, c, srv.URL+"/queues/emails/dead/requeue", url.Values{"csrf": {token}, "seq": {strconv.FormatUint(dead[0].Sequence, 10)}}, nil)
	if status != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "done=requeued&n=1") {
		t.Fatalf("requeue one: %d to %q", status, resp.Header.Get("Location"))
	}
	if _, err := f.adm.DeadLetter(ctx, "emails", dead[0].Sequence); !errors.Is(err, admin.ErrNoDeadLetter) {
		t.Fatalf("the requeued dead letter is still there: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, "the requeued job dead again", func() bool {
		qi, err := f.adm.Queue(ctx, "emails")
		return err == nil && qi.Dead == 2
	})
	for _, form := range []url.Values{{"csrf": {token}}, {"csrf": {token}, "seq": {"x"}}, {"csrf": {token}, "seq": {"0"}}} {
		if status, _, _ = post(t, c, srv.URL+"/queues/emails/dead/requeue", form, nil); status != http.StatusBadRequest {
			t.Errorf("requeue with %v: %d; want 400", form, status)
		}
	}

	// Purge asks first; confirmed, it purges.
	status, page, _ = post(t, c, srv.URL+"/queues/emails/dead/purge", url.Values{"csrf": {token}}, nil)
	if qi, _ := f.adm.Queue(ctx, "emails"); status != 200 || !strings.Contains(page, `id="confirm"`) || qi.Dead != 2 {
		t.Fatalf("purge without confirm: %d, %d dead; want the confirmation page, 2 dead", status, qi.Dead)
	}
	status, _, resp = post(t, c, srv.URL+"/queues/emails/dead/purge", url.Values{"csrf": {token}, "confirm": {"1"}}, nil)
	if qi, _ := f.adm.Queue(ctx, "emails"); status != http.StatusSeeOther || qi.Dead != 0 || !strings.Contains(resp.Header.Get("Location"), "done=purged&n=2") {
		t.Fatalf("confirmed purge: %d, %d dead, to %q", status, qi.Dead, resp.Header.Get("Location"))
	}
	// A flash code not known says nothing; a known one cannot be made to say more.
	_, page, _ = get(t, c, srv.URL+"/queues/emails/dead?done=<b>hacked</b>")
	if strings.Contains(page, "hacked") {
		t.Errorf("an unknown flash code was shown")
	}
	// Cancel a running job from its page.
	status, _, _ = post(t, c, srv.URL+"/queues/emails/jobs/slow-1/cancel", url.Values{"csrf": {token}}, nil)
	if r, err := f.adm.Job(ctx, "emails", "slow-1"); status != http.StatusSeeOther || err != nil || r.State != "cancelled" {
		t.Errorf("cancel: %d, record %+v, %v", status, r, err)
	}
	if status, page, _ = post(t, c, srv.URL+"/queues/emails/jobs/welcome-1/cancel", url.Values{"csrf": {token}}, nil); status != http.StatusBadRequest {
		t.Errorf("cancel of a done job: %d; want 400\n%s", status, page)
	}
	// Schedules: pause, resume, remove.
	for _, step := range []struct{ action, want string }{{"pause", "paused"}, {"resume", "active"}} {
		post(t, c, srv.URL+"/queues/emails/schedules/nightly/"+step.action, url.Values{"csrf": {token}}, nil)
		_, page, _ = get(t, c, srv.URL+"/queues/emails/schedules")
		if got := cell(page, "schedule", "nightly", "status"); got != step.want {
			t.Errorf("after %s, schedule nightly is %q; want %q", step.action, got, step.want)
		}
	}
	post(t, c, srv.URL+"/queues/emails/schedules/nightly/remove", url.Values{"csrf": {token}}, nil)
	if ss, err := f.adm.Schedules(ctx, "emails"); err != nil || len(ss) != 0 {
		t.Errorf("after remove: schedules %v, %v", ss, err)
	}
}

// With a token, a browser is sent to the login page, which sets a session cookie;
// scripts send the token as a bearer. Basic auth challenges.
func TestTokenAndBasicAuth(t *testing.T) {
	t.Parallel()
	f := fill(t)
	srv := f.serve(t, ui.Token("s3cret"), ui.Prefix("/workq"))
	c := browser(t)
	status, _, resp := get(t, c, srv.URL+"/workq/queues/emails")
	if loc := resp.Header.Get("Location"); status != http.StatusSeeOther || loc != "/workq/login?next=%2Fworkq%2Fqueues%2Femails" {
		t.Fatalf("without the token: %d to %q; want the login page", status, loc)
	}
	// The paths open without the token (static files, the login page) open nothing
	// else: the mux sends an unclean path to its clean form first.
	for _, p := range []string{"/workq/static/../queues/emails", "/workq/static/%2e%2e/locks", "/workq/login/../locks"} {
		if status, page, _ := get(t, c, srv.URL+p); status == 200 || strings.Contains(page, "invoice-run") || strings.Contains(page, "Queue emails") {
			t.Errorf("GET %s without the token: %d", p, status)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/workq/", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	if status, _, _ := fetch(t, c, req); status == 200 {
		t.Fatal("a wrong bearer token was let in")
	}
	req.Header.Set("Authorization", "Bearer s3cret")
	if status, page, _ := fetch(t, c, req); status != 200 || !strings.Contains(page, `href="/workq/queues/emails"`) {
		t.Fatalf("bearer token: %d, or links without the prefix", status)
	}
	if status, _, _ := post(t, c, srv.URL+"/workq/login", url.Values{"token": {"nope"}, "next": {"/workq/locks"}}, nil); status != http.StatusUnauthorized {
		t.Fatalf("login with a wrong token: %d; want 401", status)
	}
	if status, _, _ := get(t, c, srv.URL+"/workq/"); status == 200 {
		t.Fatal("a wrong login let the browser in")
	}
	status, _, resp = post(t, c, srv.URL+"/workq/login", url.Values{"token": {"s3cret"}, "next": {"//evil.example/x"}}, nil)
	if status != http.StatusSeeOther || resp.Header.Get("Location") != "/workq/" {
		t.Fatalf("login: %d to %q; want /workq/ (not the foreign next)", status, resp.Header.Get("Location"))
	}
	for _, ck := range resp.Cookies() {
		if strings.Contains(ck.Value, "s3cret") {
			t.Fatal("the session cookie holds the token")
		}
	}
	if status, _, _ := get(t, c, srv.URL+"/workq/locks"); status != 200 {
		t.Fatalf("after login: %d", status)
	}
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/locks", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	if status, _, _ := fetch(t, c, req); status != 404 {
		t.Errorf("outside the prefix: %d; want 404", status)
	}

	basic := f.serve(t, ui.BasicAuth("ops", "pw"))
	status, _, resp = get(t, c, basic.URL+"/")
	if status != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("basic auth without credentials: %d, %q", status, resp.Header.Get("WWW-Authenticate"))
	}
	for pw, want := range map[string]int{"bad": 401, "pw": 200} {
		req, _ := http.NewRequest(http.MethodGet, basic.URL+"/", nil)
		req.SetBasicAuth("ops", pw)
		if status, _, _ := fetch(t, c, req); status != want {
			t.Errorf("basic auth with password %q: %d; want %d", pw, status, want)
		}
	}
}

// With the NATS server down, a page says so within the dashboard's Timeout (504)
// rather than hang; once the server is back, pages work again.
func TestServerDownAnswersInTime(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	if _, err := producer.New(testenv.Context(t, 10*time.Second), js, "q"); err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(js)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(adm, ui.Timeout(time.Second), ui.Refresh(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := browser(t)
	env.Stop()
	// The pages share a reading of the queues for half the refresh (250 ms here), and
	// the sampler took one as the handler started: let it age past that.
	time.Sleep(300 * time.Millisecond)
	for _, path := range []string{"/", "/queues/q", "/queues/q/jobs/a", "/locks"} {
		start := time.Now()
		status, page, _ := get(t, c, srv.URL+path)
		if took := time.Since(start); status != http.StatusGatewayTimeout || took > 10*time.Second || !strings.Contains(page, "did not answer within 1s") {
			t.Errorf("GET %s with the server down: %d after %s; want 504 within the timeout\n%s", path, status, took, page)
		}
	}
	env.Restart(t)
	testenv.Eventually(t, 30*time.Second, "the queue page again", func() bool {
		status, _, _ := get(t, c, srv.URL+"/queues/q")
		return status == 200
	})
}

// New refuses options that would open or break the dashboard.
func TestOptionsRefused(t *testing.T) {
	t.Parallel()
	adm, err := admin.New(testenv.Start(t).JetStream(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, opt := range map[string]ui.Option{
		"empty token":    ui.Token(""),
		"empty password": ui.BasicAuth("ops", ""),
		"user with ':'":  ui.BasicAuth("a:b", "pw"),
		"relative path":  ui.Prefix("workq"),
		"quote in path":  ui.Prefix(`/a"b`),
		"fast refresh":   ui.Refresh(time.Millisecond),
		"nil logger":     ui.Logger(nil),
		"zero timeout":   ui.Timeout(0),
		"fast sampling":  ui.SampleEvery(time.Millisecond),
		"nil option":     nil,
	} {
		if _, err := ui.New(adm, opt); !errors.Is(err, ui.ErrInvalidOption) {
			t.Errorf("%s: %v; want ErrInvalidOption", name, err)
		}
	}
	if _, err := ui.New(nil); !errors.Is(err, ui.ErrInvalidOption) {
		t.Errorf("nil admin: %v; want ErrInvalidOption", err)
	}
}
