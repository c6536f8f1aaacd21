package ui

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
)

// csrfCookie holds the CSRF secret every action's form must repeat (the double
// submit pattern): a page of another site can make a browser send the cookie, but
// cannot read it to put it in the form.
const csrfCookie = "workq_ui_csrf"

// csrfToken returns the request's CSRF secret, setting a new one if it has none.
func (h *handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: v, Path: h.cfg.prefix + "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	return v
}

// csrfValid reports whether an action's form carries the request's CSRF secret.
func (h *handler) csrfValid(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	return err == nil && len(c.Value) >= 32 && equal(r.PostFormValue("csrf"), c.Value)
}
