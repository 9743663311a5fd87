package testkit_test

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/superstep/superstep"

// goList returns the packages go list prints for pkg with the template's
// field (Imports: direct; Deps: transitive).
func goList(t *testing.T, field, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{join ."+field+" \"\\n\"}}", mod+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// TestLayout holds the data flow of DESIGN §3 and docs/architecture.md:
// the protocol package is a leaf (no I/O: no host, store or net/http,
// nothing of ours but internal/jsonstr, itself a pure leaf); host imports no net/http and no HTTP package of
// ours; workflow and store import none of the layers above them; the
// console imports nothing of ours; serve (the server `superstep serve`
// runs, for embedding) sits above every library and below the command.
func TestLayout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pkg, field string
		ok         func(dep string) bool
		why        string
	}{
		{"/protocol", "Deps", func(d string) bool {
			return (!strings.HasPrefix(d, mod) || d == mod+"/internal/jsonstr") && d != "net/http"
		}, "the protocol package depends on nothing of ours (but the pure string encoder) and does no HTTP"},
		{"/internal/jsonstr", "Deps", func(d string) bool { return !strings.HasPrefix(d, mod) && d != "net/http" },
			"the JSON string encoder protocol and workflow share is a pure leaf"},
		{"/host", "Imports", func(d string) bool { return d != "net/http" && !strings.HasPrefix(d, mod+"/responses") },
			"host drives runs; HTTP is the responses package's"},
		{"/workflow", "Deps", func(d string) bool {
			return !strings.HasPrefix(d, mod) || d == mod+"/internal/invariants" || d == mod+"/internal/wait" || d == mod+"/internal/jsonstr"
		}, "the engine knows nothing of HTTP, storage, agents or the Responses API"},
		{"/protocol", "Deps", func(d string) bool { return !strings.HasPrefix(d, "go.opentelemetry.io/") },
			"the protocol package is the wire model: no tracing"},
		{"/workflow", "Deps", noOTelSDK, "libraries trace with the OpenTelemetry API only; the SDK is the command's choice"},
		{"/agent", "Deps", noOTelSDK, "libraries trace with the OpenTelemetry API only; the SDK is the command's choice"},
		{"/host", "Deps", noOTelSDK, "libraries trace with the OpenTelemetry API only; the SDK is the command's choice"},
		{"/responses", "Deps", noOTelSDK, "libraries trace with the OpenTelemetry API only; the SDK is the command's choice"},
		{"/console", "Deps", func(d string) bool { return !strings.HasPrefix(d, mod) },
			"the console is static files over net/http: it reaches the server through the HTTP API only"},
		{"/store", "Deps", func(d string) bool { return !strings.HasPrefix(d, mod) },
			"the store interface knows nothing of workflows or the API"},
		{"/store/sqlite", "Deps", func(d string) bool {
			return !strings.HasPrefix(d, mod) || strings.HasPrefix(d, mod+"/store") || strings.HasPrefix(d, mod+"/internal/")
		}, "a backend depends on the store package only"},
		{"/store/postgres", "Deps", func(d string) bool {
			return !strings.HasPrefix(d, mod) || strings.HasPrefix(d, mod+"/store") || strings.HasPrefix(d, mod+"/internal/")
		}, "a backend depends on the store package only"},
		{"/serve", "Deps", noOTelSDK, "libraries trace with the OpenTelemetry API only; the SDK is the command's choice"},
		{"/serve", "Imports", func(d string) bool { return d != mod+"/examples" && !strings.HasPrefix(d, mod+"/cmd") },
			"serve hosts its caller's workflows; the demos and flags are the command's"},
		{"/host", "Deps", notServe, "serve wires the libraries together; no library depends on it"},
		{"/responses", "Deps", notServe, "serve wires the libraries together; no library depends on it"},
		{"/agent", "Deps", notServe, "serve wires the libraries together; no library depends on it"},
		{"/webhook", "Deps", notServe, "serve wires the libraries together; no library depends on it"},
		{"/examples", "Deps", notServe, "serve wires the libraries together; no library depends on it"},
		{"/examples/guide", "Imports", func(d string) bool { return d != mod+"/host" },
			"the guide's program reaches the host through serve only (docs/guide.md)"},
	} {
		for _, d := range goList(t, c.field, c.pkg) {
			if d == mod+c.pkg {
				continue
			}
			if !c.ok(d) {
				t.Errorf("%s depends on %s: %s", c.pkg, d, c.why)
			}
		}
	}
}

// notServe: not the serve package.
func notServe(d string) bool { return d != mod+"/serve" }

// noOTelSDK: an OpenTelemetry API package, not the SDK nor an exporter.
func noOTelSDK(d string) bool {
	return !strings.HasPrefix(d, "go.opentelemetry.io/otel/sdk") && !strings.HasPrefix(d, "go.opentelemetry.io/otel/exporters")
}
