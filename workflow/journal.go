package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
)

// Journal records what the executors of a running superstep finished (a
// model call's reply, a tool call's result, a sub-step of RunStep), durably
// and before it is used, so that when the superstep is run again after a
// crash those calls are answered from the journal instead of being made
// again. A host implements it on its store and gives it to a run with
// WithJournal; the engine numbers the calls (JournalCall), and code that
// makes calls goes through Journaled or RunStep. Without a journal, calls
// are simply made.
//
// Calls are matched by position, not by content: the n-th journaled call
// of an executor's attempt in a superstep is answered by what that call
// recorded last time, provided its request hash is the same. A call whose
// request differs (the executor is not deterministic up to that point) is
// made, and the journal of that executor's calls from that position on is
// discarded by the implementation.
type Journal interface {
	// Replay returns the result recorded for call, when the journal holds
	// one for call's Step, Scope and Pos with the same Hash. On a
	// different Hash it discards the recorded calls of call.Scope from
	// call.Pos on and reports false.
	Replay(ctx context.Context, call JournalCall) (result []byte, ok bool)
	// Record stores result for call durably before returning. After an
	// error the result must not be used: the call is treated as in
	// flight (the superstep does not complete).
	Record(ctx context.Context, call JournalCall, result []byte) error
}

// JournalCall names one journaled call.
type JournalCall struct {
	// Step is the superstep of the run the journal was given to (for a
	// call inside a sub-workflow, the enclosing run's).
	Step int64
	// Scope names who made the call: the executor and its attempt,
	// "writer@1", prefixed by the enclosing executors' inside a
	// sub-workflow ("sub@1/inner.2@1": the inner run's step 2).
	Scope string
	// Pos is the call's position among Scope's journaled calls, from 0.
	Pos int
	// Kind says what was called ("model", "tool", "step"); Name which one.
	Kind string
	Name string
	// Hash identifies the call's request (Kind, Name and the request).
	Hash string
}

// Key is Scope and Pos as one string ("writer@1#3").
func (c JournalCall) Key() string { return c.Scope + "#" + strconv.Itoa(c.Pos) }

type journalKey struct{}

// journalBase is the journal WithJournal put on a context.
type journalBase struct{ j Journal }

// journalScope numbers the journaled calls of one executor attempt; it is
// on the context the attempt runs with. Tools may call from goroutines of
// their own, hence the lock.
type journalScope struct {
	j      Journal
	step   int64
	prefix string
	mu     sync.Mutex
	next   int
}

// WithJournal returns ctx carrying j: a Run given this context journals
// its executors' calls in j (see Journal). A nil j returns ctx.
func WithJournal(ctx context.Context, j Journal) context.Context {
	if j == nil {
		return ctx
	}
	return context.WithValue(ctx, journalKey{}, journalBase{j: j})
}

// journalContext returns the context of executor id's attempt in step n:
// with a scope of its own when ctx carries a journal (given to the run,
// or the scope of the executor a sub-workflow runs in), else ctx itself.
func journalContext(ctx context.Context, n int64, id string, attempt int) context.Context {
	j, step, prefix, ok := executorScope(ctx, n, id)
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, journalKey{}, &journalScope{j: j, step: step, prefix: prefix + "@" + strconv.Itoa(attempt)})
}

// executorScope returns the journal ctx carries and the step and scope
// prefix of executor id in step n under it: id at the top, the enclosing
// executor's scope, id and n in a sub-workflow. ok is false without a
// journal.
func executorScope(ctx context.Context, n int64, id string) (j Journal, step int64, prefix string, ok bool) {
	switch v := ctx.Value(journalKey{}).(type) {
	case journalBase:
		return v.j, n, id, true
	case *journalScope:
		return v.j, v.step, v.prefix + "/" + id + "." + strconv.FormatInt(n, 10), true
	}
	return nil, 0, "", false
}

// Journaling reports whether calls made with ctx are journaled: ctx is
// an executor's in a run with a journal. Callers use it to skip preparing
// a request's bytes for Journaled when nothing records them.
func Journaling(ctx context.Context) bool {
	_, ok := ctx.Value(journalKey{}).(*journalScope)
	return ok
}

// journalHash returns the hash Journaled gives a call of kind and name
// with request.
func journalHash(kind, name string, request []byte) string {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(request)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Journaled makes one journaled call: when ctx is an executor's in a run
// with a journal, it takes the next position of the executor's calls and
// returns the result recorded there (replayed true) when its request is
// the same; otherwise it calls fn and records its result before returning
// it. An error of fn is returned unrecorded (the call is made again next
// time), and so is a failure to record (wrapped), after which result is
// not to be used. Without a journal it calls fn.
func Journaled(ctx context.Context, kind, name string, request []byte, fn func(context.Context) ([]byte, error)) (result []byte, replayed bool, err error) {
	s, _ := ctx.Value(journalKey{}).(*journalScope)
	if s == nil {
		result, err = fn(ctx)
		return result, false, err
	}
	s.mu.Lock()
	call := JournalCall{Step: s.step, Scope: s.prefix, Pos: s.next, Kind: kind, Name: name, Hash: journalHash(kind, name, request)}
	s.next++
	s.mu.Unlock()
	if res, ok := s.j.Replay(ctx, call); ok {
		return res, true, nil
	}
	if result, err = fn(ctx); err != nil {
		return nil, false, err
	}
	if err := s.j.Record(ctx, call, result); err != nil {
		return nil, false, fmt.Errorf("workflow: journal %s %q: %w", kind, name, err)
	}
	return result, false, nil
}

// RunStep runs fn at most once per finished superstep, in the manner of
// DBOS's RunAsStep: inside an executor of a run with a journal, a RunStep
// that finished (fn returned no error) before a crash is not run again
// when the superstep re-runs; its result, recorded as JSON, is returned
// instead. Steps are matched by their order among the executor's
// journaled calls and by name (see Journal), so an executor should make
// them in the same order each time. T must survive a JSON round trip.
// Without a journal (outside a run, or a host that keeps none) fn simply
// runs. An error of fn is returned and not recorded.
func RunStep[T any](ctx context.Context, name string, fn func(context.Context) (T, error)) (T, error) {
	var v T
	var fresh bool
	data, replayed, err := Journaled(ctx, "step", name, nil, func(ctx context.Context) ([]byte, error) {
		r, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		v, fresh = r, true
		return json.Marshal(r)
	})
	if err != nil {
		var zero T
		return zero, err
	}
	if !replayed && fresh {
		return v, nil
	}
	if err := json.Unmarshal(data, &v); err != nil {
		var zero T
		return zero, fmt.Errorf("workflow: step %q: recorded result: %w", name, err)
	}
	return v, nil
}
