// Package e2e holds superstep's end-to-end tests: the official openai-go
// v3 client and, in e2e/node, the openai npm package, the Vercel AI SDK
// and LangChain JS (TestNodeClient) against a real server
// (responses over host over a SQLite file), in process and as the built
// cmd/superstep binary. It has no non-test code.
package e2e
