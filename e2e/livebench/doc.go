// Package livebench measures live token streaming (issue #7) end to end:
// tokens/s through one streaming response and through 64 concurrent ones,
// over real HTTP with the openai-go client, for live and committed
// publication against the raw model server stream, on SQLite and
// PostgreSQL, and the latency each token gains from being logged before it
// is sent. It has no non-test code; see docs/benchmarks.md, "Live token
// streaming (#7)", for the command and the results.
package livebench
