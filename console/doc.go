// Package console serves superstep's web console: static files, embedded in
// the binary, that `superstep serve` mounts at /ui/.
//
// The console is a page of plain ES modules and one CSS file, with no build
// step and no third-party code: what is in assets/ is what the browser runs,
// so it works offline and a reviewer reads the shipped code. It reads the
// inspection API (/v1/runs...) and the Responses API from the browser with
// the key the user enters (kept in sessionStorage) and streams a response's
// events with fetch and a stream reader, since EventSource cannot send an
// Authorization header.
//
// The files themselves need no key: they hold no data. Every page is served
// with a Content-Security-Policy that allows only the console's own scripts,
// styles and same-origin requests.
//
// The modules in assets/js that touch no DOM (sse.js, timeline.js,
// layout.js, diff.js) are unit-tested with node:test from e2e/browser, and
// the pages in headless Chromium by e2e's TestConsoleBrowser.
package console
