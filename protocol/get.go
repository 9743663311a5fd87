package protocol

import (
	"encoding/json"
	"errors"
)

// ReadGetBody reads stream and starting_after from the body of a GET of a
// response, when it holds a JSON object: openai-go's GetStreaming sends
// {"stream":true} there. An empty or null body sets nothing; startingAfter
// is nil when the body does not set it. Other fields are ignored.
func ReadGetBody(body []byte) (stream bool, startingAfter *int64, err error) {
	if IsNull(body) {
		return false, nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return false, nil, requestErr("", CodeInvalidJSON,
			"We could not parse the JSON body of your request: %s. The body must be a JSON object.", jsonProblem(err))
	}
	if fields == nil {
		return false, nil, requestErr("", CodeInvalidJSON, "The request body must be a JSON object, not null.")
	}
	if stream, err = boolField(fields, "stream", false); err != nil {
		return false, nil, err
	}
	if raw := fields["starting_after"]; !IsNull(raw) {
		var n int64
		if err := json.Unmarshal(raw, &n); err != nil || n < -1 {
			return false, nil, typeError("starting_after", "an integer", raw)
		}
		startingAfter = &n
	}
	return stream, startingAfter, nil
}

// unmarshalTypeProblem describes a JSON value of the wrong type without
// Go type names ("expected an object, got array").
func unmarshalTypeProblem(err error) (string, bool) {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return "expected an object, got " + te.Value, true
	}
	return "", false
}
