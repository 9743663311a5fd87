package agent

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/superstep/superstep/workflow"
)

// AnswerValue converts the text of a function call output to the type req
// expects: the text itself for string (and any); otherwise the text parsed
// as JSON into the response type.
func AnswerValue(req workflow.Request, output string) (any, error) {
	rt := req.ResponseType
	if rt == nil || rt.Kind() == reflect.String || (rt.Kind() == reflect.Interface && rt.NumMethod() == 0) {
		if rt != nil && rt.Kind() == reflect.String {
			return reflect.ValueOf(output).Convert(rt).Interface(), nil
		}
		return output, nil
	}
	p := reflect.New(rt)
	if err := json.Unmarshal([]byte(output), p.Interface()); err != nil {
		return nil, fmt.Errorf("agent: call_id %q: output is not a JSON %v: %w", req.ID, rt, workflow.ErrAnswerType)
	}
	return p.Elem().Interface(), nil
}

// valueText renders a workflow value as text: strings as they are, other
// values as JSON.
func valueText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case fmt.Stringer:
		return v.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// UpdateFromEvent maps a workflow event to an update: an Output becomes
// text, except an Update of kind UpdateToolCall (an agent executor's own
// tool call, see Executor) or UpdateFunctionCall (a call its agent asks the
// caller to answer, see WithMemory), which stays as it is; a RequestInfo
// becomes a function call (see FunctionCall). Other events have no update.
func UpdateFromEvent(ev workflow.Event) (Update, bool) {
	switch e := ev.(type) {
	case workflow.Output:
		if u, ok := e.Value.(Update); ok && (u.Kind == UpdateToolCall || u.Kind == UpdateFunctionCall) {
			u.Source = e.ExecutorID
			return u, true
		}
		return Update{Kind: UpdateText, Text: valueText(e.Value), Source: e.ExecutorID}, true
	case workflow.RequestInfo:
		return RequestUpdate(e.Request), true
	}
	return Update{}, false
}

// RequestUpdate maps a pending request to a function-call update.
func RequestUpdate(r workflow.Request) Update {
	u := Update{Kind: UpdateFunctionCall, CallID: r.ID, Name: r.ExecutorID, Source: r.ExecutorID}
	switch p := r.Payload.(type) {
	case FunctionCall:
		u.Name, u.Arguments = p.Name, p.Arguments
	default:
		b, err := json.Marshal(p)
		if err != nil {
			b = []byte("null")
		}
		u.Arguments = string(b)
	}
	return u
}
