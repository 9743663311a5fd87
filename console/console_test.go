package console

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, h http.Handler, method, target string, hdr map[string]string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func TestHandler_ServesEveryAsset(t *testing.T) {
	t.Parallel()
	if len(files) < 5 {
		t.Fatalf("%d embedded files, want the page, its styles and modules", len(files))
	}
	for name, f := range files {
		res := get(t, Handler(), http.MethodGet, Prefix+name, nil)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK || string(body) != string(f.data) {
			t.Fatalf("GET %s: %d, %d bytes; want 200 and the file's %d", name, res.StatusCode, len(body), len(f.data))
		}
		want := map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}[path.Ext(name)]
		if got := res.Header.Get("Content-Type"); want != "" && got != want {
			t.Errorf("%s: Content-Type %q, want %q", name, got, want)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Cache-Control") != "no-cache" || res.Header.Get("ETag") == "" {
			t.Errorf("%s: headers %v", name, res.Header)
		}
	}
}

func TestHandler_Index(t *testing.T) {
	t.Parallel()
	res := get(t, Handler(), http.MethodGet, Prefix, nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `<script type="module" src="js/app.js">`) {
		t.Fatalf("GET %s: %d\n%s", Prefix, res.StatusCode, body)
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, d)
		}
	}
}

func TestHandler_NotModified(t *testing.T) {
	t.Parallel()
	etag := get(t, Handler(), http.MethodGet, Prefix+"js/app.js", nil).Header.Get("ETag")
	for _, inm := range []string{etag, `"other", ` + etag, "W/" + etag, "*"} {
		if res := get(t, Handler(), http.MethodGet, Prefix+"js/app.js", map[string]string{"If-None-Match": inm}); res.StatusCode != http.StatusNotModified {
			t.Errorf("If-None-Match %s: %d, want 304", inm, res.StatusCode)
		}
	}
	if res := get(t, Handler(), http.MethodGet, Prefix+"js/app.js", map[string]string{"If-None-Match": `"stale"`}); res.StatusCode != http.StatusOK {
		t.Errorf("stale If-None-Match: %d, want 200", res.StatusCode)
	}
}

func TestHandler_Refuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method, target string
		status         int
	}{
		{http.MethodPost, Prefix, http.StatusMethodNotAllowed},
		{http.MethodDelete, Prefix + "js/app.js", http.StatusMethodNotAllowed},
		{http.MethodGet, Prefix + "missing.js", http.StatusNotFound},
		{http.MethodGet, Prefix + "js/", http.StatusNotFound},
		{http.MethodGet, Prefix + "../console.go", http.StatusNotFound},
	} {
		res := get(t, Handler(), c.method, c.target, nil)
		if res.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.target, res.StatusCode, c.status)
		}
		if c.status == http.StatusMethodNotAllowed && res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q", c.method, c.target, res.Header.Get("Allow"))
		}
	}
	if res := get(t, Handler(), http.MethodHead, Prefix, nil); res.StatusCode != http.StatusOK || res.ContentLength <= 0 {
		t.Errorf("HEAD: %d, length %d", res.StatusCode, res.ContentLength)
	}
}

func TestWith(t *testing.T) {
	t.Parallel()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "api "+r.URL.Path) })
	h := With(api)
	if res := get(t, h, http.MethodGet, "/ui", nil); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != Prefix {
		t.Errorf("/ui: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	for _, p := range []string{"/v1/responses", "/uix", "/healthz", "/"} {
		body, _ := io.ReadAll(get(t, h, http.MethodGet, p, nil).Body)
		if string(body) != "api "+p {
			t.Errorf("%s reached %q, want the API", p, body)
		}
	}
	if res := get(t, h, http.MethodGet, Prefix+"style.css", nil); res.Header.Get("Content-Type") != "text/css; charset=utf-8" {
		t.Errorf("style.css through With: %v", res.Header)
	}
}

var (
	importRE = regexp.MustCompile(`(?m)^\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]`)
	refRE    = regexp.MustCompile(`(?:src|href)="([^"#][^"]*)"`)
	urlRE    = regexp.MustCompile(`https?://[^\s'"` + "`" + `)]+`)
)

// TestAssets_SelfContained holds the console to working offline: every
// module a module imports and every file the page names is embedded, the
// page has no inline script (the CSP forbids it), and no file names another
// origin (the one URL allowed is the SVG namespace, an identifier that is
// never fetched).
func TestAssets_SelfContained(t *testing.T) {
	t.Parallel()
	checked := 0
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, _ := assets.ReadFile(p)
		text := string(data)
		name := strings.TrimPrefix(p, "assets/")
		for _, u := range urlRE.FindAllString(text, -1) {
			if u != "http://www.w3.org/2000/svg" {
				t.Errorf("%s names another origin: %s", name, u)
			}
		}
		var refs []string
		switch path.Ext(name) {
		case ".js":
			for _, m := range importRE.FindAllStringSubmatch(text, -1) {
				refs = append(refs, m[1])
			}
		case ".html":
			for _, m := range refRE.FindAllStringSubmatch(text, -1) {
				if !strings.HasPrefix(m[1], "data:") {
					refs = append(refs, m[1])
				}
			}
			if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(text) || !strings.Contains(text, "<script") {
				t.Errorf("%s: want only <script src>, no inline script", name)
			}
		}
		for _, ref := range refs {
			checked++
			target := path.Clean(path.Join(path.Dir(name), ref))
			if _, ok := files[target]; !ok {
				t.Errorf("%s refers to %s (%s), which is not embedded", name, ref, target)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("%d references checked: the patterns no longer find the imports", checked)
	}
}
