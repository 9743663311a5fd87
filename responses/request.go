package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/responses/wire"
)

// Limits of the metadata field, as OpenAI documents them.
const (
	MetadataMaxKeys     = wire.MetadataMaxKeys
	MetadataMaxKeyLen   = wire.MetadataMaxKeyLen
	MetadataMaxValueLen = wire.MetadataMaxValueLen
)

// MaxInputItemsDefault is the default cap on the number of input items of
// a create request (Options.MaxInputItems). We found no documented OpenAI
// cap; this one is superstep's, so that one request cannot make every later
// read of it (recovery, input_items) expensive.
const MaxInputItemsDefault = 10_000

// Error codes of request validation.
const (
	codeInvalidJSON   = wire.CodeInvalidJSON
	codeInvalidType   = wire.CodeInvalidType
	codeInvalidValue  = wire.CodeInvalidValue
	codeMissingParam  = wire.CodeMissingParam
	codeUnsupportedIn = wire.CodeUnsupportedValue
)

// parseCreate parses the body of POST /v1/responses into CreateParams with
// the one reader of create requests (wire.ParseCreate), which recovery and
// input_items use too. Unknown fields are tolerated; a known field of the
// wrong type, a duplicate key, a case variant of a known key or more than
// maxInputItems input items (when > 0) is a 400 naming the field. The
// returned params keep body as Request.
func parseCreate(body []byte, maxInputItems int) (*host.CreateParams, error) {
	req, err := wire.ParseCreate(body, maxInputItems)
	if err != nil {
		if re, ok := errors.AsType[*wire.RequestError](err); ok {
			return nil, badRequest(re.Param, re.Code, "%s", re.Message)
		}
		return nil, fmt.Errorf("responses: parse request: %w", err)
	}
	return &host.CreateParams{Request: body, Model: req.Model, Input: req.Input, Instructions: req.Instructions,
		Metadata: req.Metadata, Stream: req.Stream, Background: req.Background, Store: req.Store,
		PreviousResponseID: req.PreviousResponseID}, nil
}

// decodeObject decodes body as one JSON object into its raw fields (the
// body of a GET; a create request is read by wire.ParseCreate).
func decodeObject(body []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, badRequest("", codeInvalidJSON,
			"We could not parse the JSON body of your request: %s. The body must be a JSON object.", jsonProblem(err))
	}
	if fields == nil {
		return nil, badRequest("", codeInvalidJSON, "The request body must be a JSON object, not null.")
	}
	return fields, nil
}

// jsonProblem describes a decode error without Go type names.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if ok := asTypeError(err, &te); ok {
		return "expected an object, got " + te.Value
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func asTypeError(err error, te **json.UnmarshalTypeError) bool {
	t, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*te = t
	}
	return ok
}

// isNull and jsonKind are the wire reader's, so that a GET body and a
// create request are judged alike.
var (
	isNull   = wire.IsNull
	jsonKind = wire.JSONKind
)

func typeError(param, want string, raw json.RawMessage) *apiError {
	return badRequest(param, codeInvalidType, "Invalid type for '%s': expected %s, but got %s instead.", param, want, jsonKind(raw))
}

// boolField reads an optional boolean; absent or null gives def.
func boolField(fields map[string]json.RawMessage, name string, def bool) (bool, error) {
	raw := fields[name]
	if isNull(raw) {
		return def, nil
	}
	var v bool
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, typeError(name, "a boolean", raw)
	}
	return v, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s...", strings.ToValidUTF8(s[:n], ""))
}
