package localmodel

import (
	"encoding/json"
	"testing"
)

func TestSchemaArguments(t *testing.T) {
	for _, tc := range []struct {
		name, schema, want string
	}{
		{"absent", ``, `{}`},
		{"invalid JSON", `{"type":`, `{}`},
		{"not an object schema", `{"type":"string"}`, `{}`},
		{"a JSON array", `[{"type":"object"}]`, `{}`},
		{"no properties", `{"type":"object"}`, `{}`},
		{"untyped empty", `{}`, `{}`},
		{"optional omitted", `{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"}}}`, `{}`},
		{"required by type",
			`{"type":"object","properties":{"s":{"type":"string"},"i":{"type":"integer"},"n":{"type":"number"},
			"b":{"type":"boolean"},"z":{"type":"null"},"opt":{"type":"string"}},"required":["s","i","n","b","z"]}`,
			`{"b":true,"i":1,"n":1,"s":"x","z":null}`},
		{"enum first value", `{"type":"object","properties":{"op":{"type":"string","enum":["+","-"]},
			"k":{"enum":[7,8]}},"required":["op","k"]}`, `{"k":7,"op":"+"}`},
		{"const", `{"type":"object","properties":{"v":{"const":"fixed"}},"required":["v"]}`, `{"v":"fixed"}`},
		{"integer minimum", `{"type":"object","properties":{"a":{"type":"integer","minimum":5},
			"b":{"type":"integer","minimum":2.5},"c":{"type":"integer","minimum":-3},
			"d":{"type":"integer","exclusiveMinimum":4},"e":{"type":"integer","minimum":4,"exclusiveMinimum":true},
			"f":{"type":"integer","maximum":-2},"g":{"type":"integer","exclusiveMaximum":0.5},
			"h":{"type":"integer","minimum":3,"multipleOf":5}},"required":["a","b","c","d","e","f","g","h"]}`,
			`{"a":5,"b":3,"c":1,"d":5,"e":5,"f":-2,"g":0,"h":5}`},
		{"number bounds", `{"type":"object","properties":{"a":{"type":"number","minimum":2.5},
			"b":{"type":"number","exclusiveMinimum":1},"c":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":0.5},
			"d":{"type":"number","maximum":0.25}},"required":["a","b","c","d"]}`,
			`{"a":2.5,"b":2,"c":0.25,"d":0.25}`},
		{"strings", `{"type":"object","properties":{"long":{"type":"string","minLength":3},
			"empty":{"type":"string","maxLength":0},"when":{"type":"string","format":"date-time"}},
			"required":["long","empty","when"]}`, `{"empty":"","long":"xxx","when":"1970-01-01T00:00:00Z"}`},
		{"arrays", `{"type":"object","properties":{"none":{"type":"array","items":{"type":"string"}},
			"one":{"type":"array","items":{"type":"integer","minimum":2},"minItems":1},
			"two":{"type":"array","items":{"type":"boolean"},"minItems":2}},"required":["none","one","two"]}`,
			`{"none":[],"one":[2],"two":[true,true]}`},
		{"nested", `{"type":"object","properties":{"user":{"type":"object","properties":{
			"name":{"type":"string"},"age":{"type":"integer"},
			"tags":{"type":"array","minItems":1,"items":{"type":"object","properties":{"k":{"type":"string","enum":["a"]},
			"v":{"type":"number"}},"required":["k"]}}},"required":["name","tags"]}},"required":["user"]}`,
			`{"user":{"name":"x","tags":[{"k":"a"}]}}`},
		{"nullable and untyped", `{"properties":{"a":{"type":["null","integer"]},"b":{"anyOf":[{"type":"boolean"},{"type":"string"}]},
			"c":{}},"required":["a","b","c"]}`, `{"a":1,"b":true,"c":"x"}`},
		{"required without properties", `{"type":"object","required":["a"],"additionalProperties":{"type":"integer"}}`, `{"a":1}`},
		{"refs", `{"$defs":{"P":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}},
			"type":"object","properties":{"p":{"$ref":"#/$defs/P"},"q":{"$ref":"#/nowhere"}},"required":["p","q"]}`,
			`{"p":{"x":1},"q":"x"}`},
		{"recursive ref ends", `{"$defs":{"N":{"type":"object","properties":{"next":{"$ref":"#/$defs/N"}},"required":["next"]}},
			"$ref":"#/$defs/N"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := schemaArguments(json.RawMessage(tc.schema))
			if !json.Valid([]byte(got)) {
				t.Fatalf("invalid JSON %q", got)
			}
			if tc.want != "" && got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// The arguments do not depend on the order of the schema's properties.
func TestSchemaArguments_Deterministic(t *testing.T) {
	a := schemaArguments(json.RawMessage(`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}},"required":["b","a"]}`))
	b := schemaArguments(json.RawMessage(`{"type":"object","required":["a","b"],"properties":{"a":{"type":"integer"},"b":{"type":"string"}}}`))
	if a != b || a != `{"a":1,"b":"x"}` {
		t.Fatalf("%s vs %s", a, b)
	}
}
