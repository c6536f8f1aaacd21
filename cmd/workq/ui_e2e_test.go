package main_test

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// uiGet fetches path from a dashboard with an optional bearer token, without
// following redirects.
func uiGet(t *testing.T, base, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// startUI starts `workq ui` on a free loopback port with args and returns it and
// its address once it serves.
func startUI(t *testing.T, host string, args ...string) (*proc, string) {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := host + ":" + strconv.Itoa(port)
	p := start(t, append([]string{"ui", "--addr", addr}, args...)...)
	waitFor(t, 15*time.Second, "workq ui serving", func() bool {
		return strings.Contains(p.stdout(), "serving the dashboard") || p.exited()
	})
	if p.exited() {
		t.Fatalf("workq ui exited: %s", p.stderr())
	}
	return p, "http://127.0.0.1:" + strconv.Itoa(port)
}

// workq ui serves the dashboard of the server it connects to, behind its token and
// read-only if asked, and stops cleanly on SIGTERM.
func TestUIServesDashboard(t *testing.T) {
	t.Parallel()
	ok(t, "", "enqueue", "uiq", "hello", "--id", "ui-job-1")
	p, base := startUI(t, "127.0.0.1", "--ui-token", "tok3n", "--read-only")
	if strings.Contains(p.stderr(), "warning") {
		t.Errorf("a warning on loopback with a token: %s", p.stderr())
	}
	if status, _ := uiGet(t, base, "/", ""); status != http.StatusSeeOther {
		t.Errorf("without the token: %d; want a redirect to the login page", status)
	}
	status, page := uiGet(t, base, "/", "tok3n")
	if status != 200 || !strings.Contains(page, `data-queue="uiq"`) || !strings.Contains(page, "read-only") {
		t.Fatalf("with the token: %d, uiq listed %v, read-only shown %v", status, strings.Contains(page, `data-queue="uiq"`), strings.Contains(page, "read-only"))
	}
	status, page = uiGet(t, base, "/queues/uiq/jobs/ui-job-1", "tok3n")
	if status != 200 || !strings.Contains(page, "hello") {
		t.Errorf("job page: %d\n%s", status, page)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/queues/uiq/dead/purge", strings.NewReader(url.Values{"confirm": {"1"}}.Encode()))
	req.Header.Set("Authorization", "Bearer tok3n")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an action on a read-only dashboard: %d; want 403", resp.StatusCode)
	}
	p.stop(t)
}

// Served beyond loopback without a token or basic auth, workq ui warns; with one,
// it does not. Bad flags are one clear line and exit 2.
func TestUIWarnsWithoutAuth(t *testing.T) {
	t.Parallel()
	open, _ := startUI(t, "0.0.0.0")
	waitFor(t, 5*time.Second, "the warning", func() bool { return strings.Contains(open.stderr(), "warning") })
	if !strings.Contains(open.stderr(), "without --ui-token or --basic-auth") {
		t.Errorf("warning: %q", open.stderr())
	}
	open.stop(t)
	guarded, _ := startUI(t, "0.0.0.0", "--basic-auth", "ops:pw")
	if strings.Contains(guarded.stderr(), "warning") {
		t.Errorf("a warning with basic auth: %q", guarded.stderr())
	}
	guarded.stop(t)

	for _, args := range [][]string{
		{"ui", "--basic-auth", "nocolon"},
		{"ui", "--addr", "nohost"},
		{"ui", "--addr", ":99999"},
		{"ui", "--refresh", "1ms"},
		{"ui", "--prefix", "relative"},
	} {
		oneLine(t, wq(t, "", args...), 2)
	}
}
