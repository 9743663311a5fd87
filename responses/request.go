package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/superstep/superstep/host"
)

// Limits of the metadata field, as OpenAI documents them.
const (
	MetadataMaxKeys     = 16
	MetadataMaxKeyLen   = 64
	MetadataMaxValueLen = 512
)

// Error codes of request validation.
const (
	codeInvalidJSON   = "invalid_json"
	codeInvalidType   = "invalid_type"
	codeInvalidValue  = "invalid_value"
	codeMissingParam  = "missing_required_parameter"
	codeUnsupportedIn = "unsupported_value"
)

// parseCreate parses the body of POST /v1/responses into CreateParams.
// Unknown fields are tolerated; a known field of the wrong type is a 400
// naming the field. The returned params keep body as Request.
func parseCreate(body []byte) (*host.CreateParams, error) {
	fields, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	p := &host.CreateParams{Request: body, Store: true}
	if p.Model, err = stringField(fields, "model"); err != nil {
		return nil, err
	}
	if p.Model == "" {
		return nil, badRequest("model", codeMissingParam, "Missing required parameter: 'model'.")
	}
	if err := parseFlags(fields, p); err != nil {
		return nil, err
	}
	if p.PreviousResponseID, err = stringField(fields, "previous_response_id"); err != nil {
		return nil, err
	}
	if p.Instructions, err = optStringField(fields, "instructions"); err != nil {
		return nil, err
	}
	if p.Metadata, err = parseMetadata(fields["metadata"]); err != nil {
		return nil, err
	}
	if p.Input, err = parseInput(fields["input"]); err != nil {
		return nil, err
	}
	return p, nil
}

// decodeObject decodes body as one JSON object into its raw fields.
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

// parseFlags reads stream, background and store, and rejects the
// combinations the API forbids.
func parseFlags(fields map[string]json.RawMessage, p *host.CreateParams) error {
	var err error
	if p.Stream, err = boolField(fields, "stream", false); err != nil {
		return err
	}
	if p.Background, err = boolField(fields, "background", false); err != nil {
		return err
	}
	if p.Store, err = boolField(fields, "store", true); err != nil {
		return err
	}
	if p.Background && !p.Store {
		return badRequest("background", codeInvalidValue,
			"Background mode requires store=true: a background response must be stored to be retrieved.")
	}
	return nil
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// jsonKind names the JSON type of raw for error messages.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

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

// stringField reads an optional string; absent or null gives "".
func stringField(fields map[string]json.RawMessage, name string) (string, error) {
	s, err := optStringField(fields, name)
	if s == nil || err != nil {
		return "", err
	}
	return *s, nil
}

// optStringField reads an optional string; absent or null gives nil.
func optStringField(fields map[string]json.RawMessage, name string) (*string, error) {
	return optString(fields[name], name)
}

func optString(raw json.RawMessage, param string) (*string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, typeError(param, "a string", raw)
	}
	return &v, nil
}

// parseMetadata reads metadata: at most 16 string values, keys at most 64
// and values at most 512 characters.
func parseMetadata(raw json.RawMessage) (map[string]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, typeError("metadata", "an object", raw)
	}
	if len(fields) > MetadataMaxKeys {
		return nil, badRequest("metadata", codeInvalidValue,
			"Invalid 'metadata': too many properties. Expected at most %d properties, but got %d instead.", MetadataMaxKeys, len(fields))
	}
	md := make(map[string]string, len(fields))
	for k, v := range fields {
		param := "metadata." + k
		if utf8.RuneCountInString(k) > MetadataMaxKeyLen {
			return nil, badRequest(param, codeInvalidValue,
				"Invalid 'metadata': key '%s' is longer than %d characters.", truncate(k, 80), MetadataMaxKeyLen)
		}
		s, err := optString(v, param)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return nil, typeError(param, "a string", v)
		}
		if utf8.RuneCountInString(*s) > MetadataMaxValueLen {
			return nil, badRequest(param, codeInvalidValue,
				"Invalid 'metadata': the value of key '%s' is longer than %d characters.", k, MetadataMaxValueLen)
		}
		md[k] = *s
	}
	return md, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s...", strings.ToValidUTF8(s[:n], ""))
}
