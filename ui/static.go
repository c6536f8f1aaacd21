package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

// staticFS holds the style sheet, the dashboard's script and the htmx library
// (version 2.0.11, with its license), served under <prefix>/static/.
//
//go:embed static
var staticFS embed.FS

func staticFiles(prefix string) http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix(prefix+"/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}
