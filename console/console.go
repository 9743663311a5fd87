package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// Prefix is the path the console is served under.
const Prefix = "/ui/"

//go:embed assets
var assets embed.FS

// contentSecurityPolicy allows the console's own files and same-origin API
// calls only: no inline script, no other origin (it works offline).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// file is one embedded asset, ready to serve.
type file struct {
	data  []byte
	ctype string
	etag  string
}

// files maps a path under Prefix ("index.html", "js/app.js") to its file.
var files = mustLoad(assets)

func mustLoad(fsys embed.FS) map[string]file {
	out := map[string]file{}
	err := fs.WalkDir(fsys, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fsys.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[strings.TrimPrefix(p, "assets/")] = file{data: data, ctype: contentType(p),
			etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("console: embedded assets: %v", err)) // a build problem, not a runtime one
	}
	return out
}

// contentType is set from the extension here rather than by the mime
// package, whose answer for .js depends on the machine's mime files.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	default:
		return "application/octet-stream"
	}
}

// Handler serves the console's files at Prefix: Prefix itself is the page
// (index.html), other paths its modules and styles. Only GET and HEAD are
// answered; files carry an ETag and must be revalidated (Cache-Control:
// no-cache), so a new binary's console is picked up at once.
func Handler() http.Handler {
	return http.HandlerFunc(serveFile)
}

func serveFile(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if name == "" {
		name = "index.html"
	}
	f, ok := files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h.Set("Content-Type", f.ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	if f.ctype == "text/html; charset=utf-8" {
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
	}
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatch(match, f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", fmt.Sprint(len(f.data)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(f.data)
	}
}

// etagMatch reports whether an If-None-Match list names etag (or is "*").
func etagMatch(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// With returns a handler serving the console at Prefix (and redirecting
// the bare "/ui" to it) and passing every other request to api untouched.
func With(api http.Handler) http.Handler {
	bare := strings.TrimSuffix(Prefix, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == bare:
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		case strings.HasPrefix(r.URL.Path, Prefix):
			serveFile(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
}
