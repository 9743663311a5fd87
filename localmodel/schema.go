package localmodel

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
)

// maxSchemaDepth bounds the nesting schemaValue follows, so that a
// recursive schema (a $ref to itself under a required property) ends.
const maxSchemaDepth = 32

// schemaArguments returns the arguments of a call of a tool whose
// parameters schema is params: a deterministic, minimal JSON object valid
// for it (see schemaValue). A schema that is absent, invalid or not an
// object schema gives "{}".
func schemaArguments(params json.RawMessage) string {
	d := json.NewDecoder(bytes.NewReader(params))
	d.UseNumber()
	var root map[string]any
	if len(params) == 0 || d.Decode(&root) != nil || root == nil {
		return "{}"
	}
	g := schemaGen{root: root}
	s := g.resolve(root, 0)
	if t := schemaType(s); t != "object" && t != "" {
		return "{}"
	}
	v, ok := g.value(s, 0).(map[string]any)
	if !ok {
		return "{}"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// schemaGen generates values for the schemas of one root schema (which
// "#/..." references point into).
type schemaGen struct {
	root map[string]any
}

// value returns a deterministic minimal value valid for schema s:
//
//   - $ref "#/<pointer>": the value of the schema it points to;
//   - const: it; enum: its first value;
//   - anyOf, oneOf, allOf: the value of the first schema;
//   - by type (the first type but "null" of a list; without a type, the
//     type its keywords imply, else a string): string "x" (or a value of
//     its format: date-time, date, time, email, uri, uuid), padded to
//     minLength with "x" and cut to maxLength; integer and number 1, raised
//     to minimum / above exclusiveMinimum, lowered to maximum / below
//     exclusiveMaximum, rounded up to a multipleOf; boolean true; null;
//     array: minItems items (the items schema's value), else [];
//     object: its required properties (from properties, else
//     additionalProperties), optional ones omitted.
//
// The boolean schema true gives "x", false (which no value satisfies) null.
func (g schemaGen) value(s any, depth int) any {
	if depth > maxSchemaDepth {
		return nil
	}
	m, ok := s.(map[string]any)
	if !ok {
		if b, ok := s.(bool); ok && !b {
			return nil
		}
		return "x"
	}
	m = g.resolve(m, depth)
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := m[k].([]any); ok && len(alts) > 0 && schemaType(m) == "" {
			return g.value(alts[0], depth+1)
		}
	}
	switch schemaType(m) {
	case "null":
		return nil
	case "boolean":
		return true
	case "integer":
		return int64(bounded(m, true))
	case "number":
		return bounded(m, false)
	case "array":
		return g.array(m, depth)
	case "object":
		return g.object(m, depth)
	}
	return stringValue(m)
}

// resolve follows "#/..." references from m to the schema they name; an
// unresolvable reference gives the empty schema.
func (g schemaGen) resolve(m map[string]any, depth int) map[string]any {
	for ; depth <= maxSchemaDepth; depth++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		ptr, ok := strings.CutPrefix(ref, "#")
		if !ok {
			return map[string]any{}
		}
		var cur any = g.root
		for _, tok := range strings.Split(ptr, "/")[1:] {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			obj, ok := cur.(map[string]any)
			if !ok {
				return map[string]any{}
			}
			cur = obj[tok]
		}
		if m, ok = cur.(map[string]any); !ok {
			return map[string]any{}
		}
	}
	return map[string]any{}
}

// array is the value of an array schema: minItems items.
func (g schemaGen) array(m map[string]any, depth int) []any {
	n, _ := number(m["minItems"])
	out := []any{}
	for i := 0; i < int(n); i++ {
		var item any = map[string]any{}
		switch items := m["items"].(type) {
		case map[string]any, bool:
			item = items
		case []any: // a tuple (draft 4 to 7)
			if i < len(items) {
				item = items[i]
			}
		}
		if prefix, ok := m["prefixItems"].([]any); ok && i < len(prefix) {
			item = prefix[i]
		}
		out = append(out, g.value(item, depth+1))
	}
	return out
}

// object is the value of an object schema: its required properties.
func (g schemaGen) object(m map[string]any, depth int) map[string]any {
	props, _ := m["properties"].(map[string]any)
	out := map[string]any{}
	req, _ := m["required"].([]any)
	for _, r := range req {
		name, ok := r.(string)
		if !ok {
			continue
		}
		ps, ok := props[name]
		if !ok {
			ps = map[string]any{}
			if ap, ok := m["additionalProperties"].(map[string]any); ok {
				ps = ap
			}
		}
		out[name] = g.value(ps, depth+1)
	}
	return out
}

// schemaType is the type of schema m: its "type", the first one but "null"
// of a list of types, or the type its keywords imply; "" if none.
func schemaType(m map[string]any) string {
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		first := ""
		for _, v := range t {
			if s, ok := v.(string); ok {
				if s != "null" {
					return s
				}
				first = s
			}
		}
		return first
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := m[k]; ok {
				return true
			}
		}
		return false
	}
	switch {
	case has("properties", "required", "additionalProperties"):
		return "object"
	case has("items", "prefixItems", "minItems"):
		return "array"
	case has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
		return "number"
	}
	return ""
}

// bounded is 1 moved into the bounds of a numeric schema m (minimum,
// exclusiveMinimum, maximum, exclusiveMaximum, the draft 4 boolean forms
// too), then rounded up to a multipleOf; integer keeps it a whole number.
func bounded(m map[string]any, integer bool) float64 {
	lo, loEx, hasLo := limit(m, "minimum", "exclusiveMinimum")
	hi, hiEx, hasHi := limit(m, "maximum", "exclusiveMaximum")
	if integer {
		lo, hi, loEx, hiEx = wholeBounds(lo, loEx, hi, hiEx)
	}
	above := func(v float64) bool { return !hasLo || v > lo || v == lo && !loEx }
	below := func(v float64) bool { return !hasHi || v < hi || v == hi && !hiEx }
	v := 1.0
	if !above(v) {
		v = lo
		if loEx {
			v = lo + 1
		}
	}
	if !below(v) {
		v = hi
		if hiEx {
			v = hi - 1
		}
	}
	if !above(v) && hasLo && hasHi {
		v = (lo + hi) / 2 // two exclusive bounds less than 1 apart
	}
	if k, ok := number(m["multipleOf"]); ok && k > 0 {
		v = math.Ceil(v/k) * k
	}
	return v
}

// wholeBounds turns the bounds of an integer into inclusive whole ones.
func wholeBounds(lo float64, loEx bool, hi float64, hiEx bool) (float64, float64, bool, bool) {
	if loEx {
		lo = math.Floor(lo) + 1
	} else {
		lo = math.Ceil(lo)
	}
	if hiEx {
		hi = math.Ceil(hi) - 1
	} else {
		hi = math.Floor(hi)
	}
	return lo, hi, false, false
}

// limit returns the bound of m under key (inclusive) or exclusive (a
// number, or draft 4's boolean that makes key's bound exclusive).
func limit(m map[string]any, key, exclusive string) (v float64, excl, ok bool) {
	if x, ok := number(m[exclusive]); ok {
		v, ok := number(m[key])
		if ok && (key == "minimum" && v > x || key == "maximum" && v < x) {
			return v, false, true // the inclusive bound is the tighter one
		}
		return x, true, true
	}
	v, ok = number(m[key])
	return v, ok && m[exclusive] == true, ok
}

// stringValue is the value of a string schema m.
func stringValue(m map[string]any) string {
	s := "x"
	switch m["format"] {
	case "date-time":
		s = "1970-01-01T00:00:00Z"
	case "date":
		s = "1970-01-01"
	case "time":
		s = "00:00:00Z"
	case "email":
		s = "x@example.com"
	case "uri", "url":
		s = "https://example.com/x"
	case "uuid":
		s = "00000000-0000-0000-0000-000000000000"
	}
	if n, ok := number(m["minLength"]); ok && len(s) < int(n) {
		s += strings.Repeat("x", int(n)-len(s))
	}
	if n, ok := number(m["maxLength"]); ok && n >= 0 && len(s) > int(n) {
		s = s[:int(n)]
	}
	return s
}

// number returns v as a float64, if it is a JSON number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}
