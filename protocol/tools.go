package protocol

import (
	"encoding/json"
	"fmt"
)

// functionToolKeys are the fields of a function tool.
var functionToolKeys = []string{"type", "name", "description", "parameters", "strict"}

// checkTools refuses a tools value the API would refuse: not an array, an
// element that is not an object with a string type, or a function tool
// without a name or with a field of the wrong type (parameters must be a
// JSON schema object). Hosted tools are checked for their type only.
func checkTools(raw json.RawMessage) error {
	if IsNull(raw) {
		return nil
	}
	var tools []json.RawMessage
	if JSONKind(raw) != "an array" || json.Unmarshal(raw, &tools) != nil {
		return typeError("tools", "an array", raw)
	}
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		if JSONKind(t) != "an object" {
			return typeError(param, "an object", t)
		}
		fields, err := decodeObject(t, param, functionToolKeys)
		if err != nil {
			return err
		}
		typ, err := optString(fields["type"], param+".type")
		if err != nil {
			return err
		}
		if typ == nil || *typ == "" {
			return requestErr(param+".type", CodeMissingParam, "Missing required parameter: '%s.type'.", param)
		}
		if *typ != "function" {
			continue
		}
		name, err := optString(fields["name"], param+".name")
		if err != nil {
			return err
		}
		if name == nil || *name == "" {
			return requestErr(param+".name", CodeMissingParam, "Missing required parameter: '%s.name'.", param)
		}
		if p := fields["parameters"]; !IsNull(p) && JSONKind(p) != "an object" {
			return typeError(param+".parameters", "an object (a JSON schema)", p)
		}
		if d := fields["description"]; !IsNull(d) && JSONKind(d) != "a string" {
			return typeError(param+".description", "a string", d)
		}
		if s := fields["strict"]; !IsNull(s) && JSONKind(s) != "a boolean" {
			return typeError(param+".strict", "a boolean", s)
		}
	}
	return nil
}
