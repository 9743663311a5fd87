package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
)

// Tool is a function a ChatAgent offers the model. Make one with NewTool.
type Tool struct {
	// Name is the function name the model calls.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is the JSON Schema of the arguments.
	Parameters map[string]any

	call func(ctx context.Context, args string) (string, error)
}

// NewTool makes a tool of fn. The parameters' schema is derived from In
// (see Schema); In is usually a struct whose fields are the arguments. The
// model's arguments are decoded into an In; the result is sent back to the
// model as text: a string as it is, other values as JSON. fn receives the
// idempotency key (IdempotencyKey) and the call id (ToolCallID) in ctx.
func NewTool[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) (*Tool, error) {
	if name == "" || fn == nil {
		return nil, fmt.Errorf("agent: NewTool: empty name or nil function")
	}
	schema, err := Schema(reflect.TypeFor[In]())
	if err != nil {
		return nil, fmt.Errorf("agent: tool %q: %w", name, err)
	}
	call := func(ctx context.Context, args string) (string, error) {
		var in In
		if args == "" {
			args = "{}"
		}
		if err := json.Unmarshal([]byte(args), &in); err != nil {
			return "", fmt.Errorf("agent: tool %q: arguments: %w", name, err)
		}
		out, err := fn(ctx, in)
		if err != nil {
			return "", err
		}
		return valueText(out), nil
	}
	return &Tool{Name: name, Description: description, Parameters: schema, call: call}, nil
}

// MustTool is NewTool for package-level tools; it panics on error (a
// programming error: a type without schema).
func MustTool[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) *Tool {
	t, err := NewTool(name, description, fn)
	if err != nil {
		panic(err)
	}
	return t
}

// Call runs the tool with JSON arguments.
func (t *Tool) Call(ctx context.Context, args string) (string, error) {
	if t.call == nil {
		return "", fmt.Errorf("agent: tool %q has no function (use NewTool)", t.Name)
	}
	return t.call(ctx, args)
}
