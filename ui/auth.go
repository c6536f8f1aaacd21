package ui

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// sessionCookie holds, after a login with the token, a value derived from it (not
// the token itself).
const sessionCookie = "workq_ui_session"

// equal compares secrets in constant time.
func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// session is the session cookie's value: an HMAC of a fixed text keyed with the
// token, so that the cookie works until the token changes and does not reveal it.
func (h *handler) session() string {
	m := hmac.New(sha256.New, []byte(h.cfg.token))
	m.Write([]byte("workq ui session"))
	return hex.EncodeToString(m.Sum(nil))
}

// authenticated reports whether r may be served, and answers it if not: with the
// login page's address for a browser when a token is set, or a basic-auth challenge.
func (h *handler) authenticated(w http.ResponseWriter, r *http.Request) bool {
	if h.cfg.token == "" && h.cfg.user == "" {
		return true
	}
	if h.cfg.user != "" {
		if u, p, ok := r.BasicAuth(); ok && equal(u, h.cfg.user) && equal(p, h.cfg.password) {
			return true
		}
	}
	if h.cfg.token != "" {
		if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && equal(t, h.cfg.token) {
			return true
		}
		if c, err := r.Cookie(sessionCookie); err == nil && equal(c.Value, h.session()) {
			return true
		}
		if p := r.URL.Path; p == h.cfg.prefix+"/login" || strings.HasPrefix(p, h.cfg.prefix+"/static/") {
			return true
		}
		if r.Method == http.MethodGet {
			http.Redirect(w, r, h.cfg.prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return false
		}
		http.Error(w, "unauthorized: the dashboard wants its token", http.StatusUnauthorized)
		return false
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="workq", charset="UTF-8"`)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
	return false
}

// loginPage asks for the token.
func (h *handler) loginPage(w http.ResponseWriter, r *http.Request) {
	if h.cfg.token == "" {
		http.Redirect(w, r, h.cfg.prefix+"/", http.StatusSeeOther)
		return
	}
	h.render(w, r, http.StatusOK, "login", "Log in", loginView{Next: h.next(r.URL.Query().Get("next"))})
}

type loginView struct {
	Next  string
	Wrong bool
}

// login checks the token entered and sets the session cookie.
func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	if h.cfg.token == "" {
		http.Redirect(w, r, h.cfg.prefix+"/", http.StatusSeeOther)
		return
	}
	if err := h.xorg.Check(r); err != nil {
		h.fail(w, r, http.StatusForbidden, "cross-origin request refused")
		return
	}
	next := h.next(r.PostFormValue("next"))
	if !equal(r.PostFormValue("token"), h.cfg.token) {
		h.cfg.logger.Warn("ui: wrong token entered", "remote", r.RemoteAddr)
		time.Sleep(300 * time.Millisecond) // slows guessing down
		h.render(w, r, http.StatusUnauthorized, "login", "Log in", loginView{Next: next, Wrong: true})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: h.session(), Path: h.cfg.prefix + "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// next is where to go after logging in: a path of the dashboard's, else its home.
func (h *handler) next(p string) string {
	home := h.cfg.prefix + "/"
	if !strings.HasPrefix(p, home) || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n") {
		return home
	}
	return p
}
