package protocol

import (
	"bytes"
	"encoding/json"
	"slices"
)

// ForkRequest is the body of POST /v1/runs/{run_id}/fork, read by
// ParseFork.
type ForkRequest struct {
	Step               int64
	Input              []InputItem
	Stream, Background bool
	Metadata           map[string]string
}

// forkKeys are the fields of a fork body.
var forkKeys = []string{"step", "input", "stream", "background", "metadata"}

// ParseFork parses a fork body with the create request's readers, so a
// fork stores nothing a create would refuse: its metadata, flags and input
// (at most maxInputItems items when > 0) are checked as ParseCreate checks
// them. step is required and >= 0. A field other than forkKeys is refused:
// a fork has no fields it may ignore.
func ParseFork(body []byte, maxInputItems int) (*ForkRequest, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, requestErr("step", CodeMissingParam, "Missing required parameter: 'step'.")
	}
	fields, err := decodeBody(body, forkKeys)
	if err != nil {
		return nil, err
	}
	for k := range fields {
		if !slices.Contains(forkKeys, k) {
			name := truncate(k, 64)
			return nil, requestErr(name, CodeInvalidValue,
				"Unknown parameter: '%s'. A fork body takes step, input, stream, background and metadata.", name)
		}
	}
	raw := fields["step"]
	if IsNull(raw) {
		return nil, requestErr("step", CodeMissingParam, "Missing required parameter: 'step'.")
	}
	p := &ForkRequest{}
	if err := json.Unmarshal(raw, &p.Step); err != nil {
		return nil, typeError("step", "an integer", raw)
	}
	if p.Step < 0 {
		return nil, requestErr("step", CodeInvalidValue, "Invalid value for 'step': expected a step number >= 0, got %d.", p.Step)
	}
	if p.Stream, err = boolField(fields, "stream", false); err != nil {
		return nil, err
	}
	if p.Background, err = boolField(fields, "background", false); err != nil {
		return nil, err
	}
	if p.Metadata, err = parseMetadata(fields["metadata"]); err != nil {
		return nil, err
	}
	if p.Input, err = parseInput(fields["input"], maxInputItems); err != nil {
		return nil, err
	}
	return p, nil
}
