// Package e2e holds superstep's end-to-end tests: the official openai-go
// v3 client and the openai npm package (e2e/node) against a real server
// (responses over host over a SQLite file), in process and as the built
// cmd/superstep binary. It has no non-test code.
package e2e
