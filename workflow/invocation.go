package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
)

// Invocation is what a run is working for, as the driver of the run (a
// host) tells it through RunOptions.Invocation: the request the current
// Run call serves. Executors read it with Context.Invocation, and code that
// has only a context.Context (an agent's tools) with InvocationFrom, so
// that workflow code learns about its request without depending on the
// host. The engine does not interpret ID, Metadata or Params.
type Invocation struct {
	// ID identifies what the run is working for; a host puts the id of the
	// response the run is producing.
	ID string
	// Metadata is the request's metadata. Do not modify it.
	Metadata map[string]string
	// Params are the request's settings for the models the run calls,
	// opaque to the engine: the driver and the code that reads them agree
	// on their type. A host puts a *agent.ModelParams here for a model
	// that honours them (a ChatAgent reads it for each model call), and
	// nil otherwise. Do not modify it.
	Params any
	// MaxSupersteps is the superstep limit of the run the executor is in
	// (counted after RunOptions.StepBase; inside a sub-workflow, the inner
	// run's). The runner sets it from RunOptions.MaxSupersteps, so a value
	// given in RunOptions.Invocation is ignored.
	MaxSupersteps int64
}

type invocationKey struct{}

// WithInvocation returns ctx carrying inv. Run puts its invocation on its
// executors' context this way; call it to give one to an executor, agent
// or tool run outside a run (in tests), or to a Run whose
// RunOptions.Invocation is nil.
func WithInvocation(ctx context.Context, inv Invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, inv)
}

// InvocationFrom returns the Invocation ctx carries, or the zero
// Invocation when it carries none.
func InvocationFrom(ctx context.Context) Invocation {
	inv, _ := ctx.Value(invocationKey{}).(Invocation)
	return inv
}

// Invocation returns what the run is working for (see Invocation).
func (c *Context) Invocation() Invocation { return InvocationFrom(c.ctx) }

// Metadata returns the request metadata value of key as a T: the text itself
// when T is a string type, otherwise the text parsed as JSON ("4" is an int
// 4, "true" a bool, `{"n":1}` a struct). An absent key gives def; a value
// that does not parse gives def and an error naming the key. Executors call
// it with c.Invocation(), tools with InvocationFrom(ctx).
func Metadata[T any](inv Invocation, key string, def T) (T, error) {
	s, ok := inv.Metadata[key]
	if !ok {
		return def, nil
	}
	var v T
	if rv := reflect.ValueOf(&v).Elem(); rv.Kind() == reflect.String {
		rv.SetString(s)
		return v, nil
	}
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return def, fmt.Errorf("workflow: metadata %s=%q is not a %v: %w", key, s, reflect.TypeFor[T](), err)
	}
	return v, nil
}
