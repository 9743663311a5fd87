// Package crash holds superstep's real-kill tests: they build
// cmd/superstep, run it as a child process on a database, drive the demo
// workflows with the openai-go client, SIGKILL the server at seeded random
// moments, restart it on the same database, resume every client with
// starting_after, and check the whole history with package verify and
// `superstep check`.
//
// TestCrash_Live_* do the same with the LLM demos (demo.writer-reviewer,
// demo.tools) on the server's own local model server (--model-server
// local), killing while tokens stream in live publication; they make a
// third of -kills, and also check that every client's rendering of the
// stream (deltas, then a reset back to the committed output, then the
// re-run's deltas) ends equal to the final output.
//
// TestCrash_Journal_* check the journal inside the superstep: demo.tools
// (turns of 3 to 4 model calls and 2 to 3 tool calls),
// demo.writer-reviewer and demo.orchestra (four agents with tools at once
// in one superstep) on a model server in the test that records every
// request, 30 kills on each backend: a model request answered before a
// later one of its agent's turn was sent is never sent again, each kill
// repeats at most one request per agent turn in progress, a tool call runs
// again only after a kill that landed while it ran (-no-journal shows the
// checks failing). They and TestCrash_Live_* log what the kills cost live
// clients in a fixed format (grep live-resets; see liveresets_test.go).
//
// TestCrash_Conversation_* drive one multi-turn conversation on a
// proxied local model (--proxy-models all), with client tool calls and
// their answers, every create sent with an Idempotency-Key, killing the
// server at seeded points of the turns; each key must give one response,
// the conversation one linear chain, and every turn the answer of a
// crash-free run (output and usage, which counts the history). Their
// length grows with -kills.
//
// TestCrash_Webhooks_* run the server with webhooks on and a verifying
// receiver in the test, killing at random, while the receiver holds a
// delivery, and right after a terminal commit, with the receiver answering
// 500 for a while: every finished response must be accepted at least
// once under one webhook-id, no unfinished one ever announced.
//
// Run more kills locally with
//
//	go test ./e2e/crash -run TestCrash -kills 2000 -timeout 1h
//
// and replay a failure with the seed it printed: -seed N.
package crash
