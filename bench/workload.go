package main

import (
	"context"
	"fmt"
	"strings"
)

// Shapes of the workloads of issue 8.
const (
	chainSteps   = 10  // W1: sequential no-op steps
	payloadBytes = 100 // W1: bytes each step hands to the next
	fanWidth     = 8   // W2: parallel branches
	eventCount   = 200 // W3: events emitted by the one step
	eventBytes   = 50  // W3: bytes per event
)

// workload names one of the measured workflow shapes.
type workload string

// The workloads. W4 (crash) and W5 (concurrency sweep of W1) are driven
// by crash.go and main.go; they reuse these shapes.
const (
	w1Chain  workload = "W1"
	w2FanOut workload = "W2"
	w3Events workload = "W3"
	w4Crash  workload = "W4"
)

// crashEvent is the event step n (from 1) of the W4 workflow emits.
func crashEvent(n int) string { return fmt.Sprintf("step-%02d", n) }

// describe is the workload's one-line description for the report.
func (w workload) describe() string {
	switch w {
	case w1Chain:
		return fmt.Sprintf("%d-step sequential chain of no-op steps, %d-byte payloads", chainSteps, payloadBytes)
	case w2FanOut:
		return fmt.Sprintf("%d-way fan-out and fan-in (split, %d branches, join)", fanWidth, fanWidth)
	case w3Events:
		return fmt.Sprintf("one step emitting %d events of %d bytes", eventCount, eventBytes)
	}
	return string(w)
}

// steps is the number of logical steps of one workflow, the unit that
// "per step" columns divide by (the same for every system).
func (w workload) steps() int {
	switch w {
	case w1Chain, w4Crash:
		return chainSteps
	case w2FanOut:
		return fanWidth + 2
	case w3Events:
		return 1
	}
	return 1
}

// supersteps is the number of supersteps superstep's engine takes for w.
func (w workload) supersteps() int {
	switch w {
	case w1Chain, w4Crash:
		return chainSteps
	case w2FanOut:
		return 3
	}
	return 1
}

// events is the number of client-visible events a workflow emits (W3).
func (w workload) events() int {
	if w == w3Events {
		return eventCount
	}
	return 0
}

// payload returns a deterministic string of n bytes.
func payload(n int) string { return strings.Repeat("x", n) }

// eventText is event i of W3, eventBytes long.
func eventText(i int) string {
	s := fmt.Sprintf("event-%04d-", i)
	return s + strings.Repeat("e", eventBytes-len(s))
}

// system is one row family of the table: a runtime on a storage.
type system interface {
	// name is the row label ("superstep", "DBOS", ...).
	name() string
	// storage says where and how durably it writes ("SQLite FULL", ...).
	storage() string
	// supports reports whether the system can run w.
	supports(w workload) bool
	// open starts the system on its (already created) database.
	open(ctx context.Context) error
	// do runs one workflow of shape w to completion.
	do(ctx context.Context, w workload, id string) error
	// close stops the system and closes its connections, so PostgreSQL
	// flushes its statistics.
	close(ctx context.Context) error
	// pgDatabase is the PostgreSQL database written, "" for SQLite.
	pgDatabase() string
}
