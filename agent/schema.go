package agent

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// ErrSchema marks a Go type that has no JSON Schema (channels, functions,
// maps with non-string keys, recursive types).
var ErrSchema = errors.New("agent: type has no JSON schema")

// Schema derives the JSON Schema of the JSON encoding of t, as tool
// parameters: structs become objects whose properties are named by their
// json tags (fields tagged "-" and unexported fields are left out; embedded
// structs without a tag are flattened). A field is required unless it is a
// pointer or tagged omitempty/omitzero. A `description:"..."` tag becomes
// the property's description. Strings, booleans, integers and floats map to
// their JSON types, slices and arrays to arrays ([]byte to a string), maps
// with string keys to objects, time.Time to a date-time string, and
// interfaces to an unconstrained schema.
func Schema(t reflect.Type) (map[string]any, error) {
	return schemaOf(t, map[reflect.Type]bool{})
}

var timeType = reflect.TypeFor[time.Time]()

func schemaOf(t reflect.Type, seen map[reflect.Type]bool) (map[string]any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		return map[string]any{"type": "string", "format": "date-time"}, nil
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}, nil
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}, nil
	case reflect.Interface:
		return map[string]any{}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string"}, nil
		}
		items, err := schemaOf(t.Elem(), seen)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%w: %v: map key must be a string", ErrSchema, t)
		}
		vals, err := schemaOf(t.Elem(), seen)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "object", "additionalProperties": vals}, nil
	case reflect.Struct:
		return structSchema(t, seen)
	}
	return nil, fmt.Errorf("%w: %v", ErrSchema, t)
}

// structSchema is the object schema of a struct type.
func structSchema(t reflect.Type, seen map[reflect.Type]bool) (map[string]any, error) {
	if seen[t] {
		return nil, fmt.Errorf("%w: %v is recursive", ErrSchema, t)
	}
	seen[t] = true
	defer delete(seen, t)
	props := map[string]any{}
	required := []string{}
	if err := addFields(t, seen, props, &required); err != nil {
		return nil, err
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}, nil
}

// addFields adds t's fields (and those of its untagged embedded structs).
func addFields(t reflect.Type, seen map[reflect.Type]bool, props map[string]any, required *[]string) error {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" && derefStruct(ft) {
			if err := addFields(deref(ft), seen, props, required); err != nil {
				return err
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s, err := schemaOf(ft, seen)
		if err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		if d := f.Tag.Get("description"); d != "" {
			s["description"] = d
		}
		props[name] = s
		optional := ft.Kind() == reflect.Pointer || strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		if !optional {
			*required = append(*required, name)
		}
	}
	return nil
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func derefStruct(t reflect.Type) bool { return deref(t).Kind() == reflect.Struct }
